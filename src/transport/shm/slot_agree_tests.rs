//! The agreement between "processes" that are threads here, each with the rows of its own
//! ranks only and real connections between them: every yes gives every process the same
//! segment; any no gives every process none.

#![allow(clippy::unwrap_used)]

use std::net::{Ipv4Addr, TcpListener, TcpStream};

use super::*;

/// Connections for every pair of `world` ranks: `conns[a][b]` is `a`'s end of the pair.
fn mesh(world: usize) -> Vec<Vec<Option<TcpStream>>> {
    let mut conns: Vec<Vec<Option<TcpStream>>> = (0..world).map(|_| (0..world).map(|_| None).collect()).collect();
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    #[allow(clippy::needless_range_loop)] // each pair fills two rows
    for a in 0..world {
        for b in a + 1..world {
            let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (s, _) = l.accept().unwrap();
            conns[a][b] = Some(c);
            conns[b][a] = Some(s);
        }
    }
    conns
}

/// Runs the agreement with the ranks grouped into `procs` (each a thread), rank `r` saying
/// `yes[r]`; every process's answer (the slots, if any).
fn run(procs: &[&[Rank]], yes: &[bool]) -> Vec<Option<Slots>> {
    let world = yes.len();
    let mut conns = mesh(world);
    let deadline = Instant::now() + Duration::from_secs(10);
    let threads: Vec<_> = procs
        .iter()
        .map(|ranks| {
            let mut rows: Vec<Option<Vec<Option<TcpStream>>>> = (0..world).map(|_| None).collect();
            for &r in *ranks {
                rows[r] = Some(std::mem::take(&mut conns[r]));
            }
            let yes = yes.to_vec();
            std::thread::spawn(move || agree_with(&mut rows, &|r| yes[r], deadline).unwrap())
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

#[test]
fn every_yes_gives_every_process_one_segment() {
    for procs in [&[&[0][..], &[1], &[2]][..], &[&[1, 2], &[0]], &[&[0, 2], &[1]], &[&[0, 1, 2]]] {
        let got = run(procs, &[true; 3]);
        assert!(got.iter().all(Option::is_some), "{procs:?}");
        // One segment: what the first process publishes, every other one sees.
        let fp = [9; crate::transport::slots::FP_WORDS];
        got[0].as_ref().unwrap().publish(procs[0][0], 0, &fp, &[1, 2, 3]);
        for s in got.iter().flatten() {
            assert!(s.arrived(procs[0][0], 0) && s.agrees(procs[0][0], 0, &fp), "{procs:?}");
        }
    }
}

#[test]
fn any_no_gives_every_process_none() {
    for no in 0..3 {
        for procs in [&[&[0][..], &[1], &[2]][..], &[&[1, 2], &[0]]] {
            let mut yes = [true; 3];
            yes[no] = false;
            let got = run(procs, &yes);
            assert!(got.iter().all(Option::is_none), "rank {no} said no, {procs:?}");
        }
    }
    assert!(run(&[&[0]], &[true]).iter().all(Option::is_none), "one rank exchanges with nobody");
}
