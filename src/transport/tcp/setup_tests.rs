//! The handshake refuses strangers with `Protocol` errors naming what is wrong, and a mesh
//! moves bytes between its ranks.

use super::*;

/// Connects to a fresh listener, writes `bytes`, and checks the hello the listener reads.
fn hello_from(bytes: &[u8]) -> Result<()> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    c.write_all(bytes).unwrap();
    drop(c.shutdown(std::net::Shutdown::Write));
    let (mut a, _) = l.accept().unwrap();
    a.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    check_hello(&mut a, [7; 16], 4, 2)
}

#[test]
fn strangers_get_protocol_errors() {
    assert!(hello_from(&hello([7; 16], 2, 0, 4)).is_ok());
    let cases: [(Vec<u8>, &str); 5] = [
        (b"GET / HTTP/1.1\r\n\r\n".repeat(8), "magic"),
        (
            {
                let mut h = hello([7; 16], 2, 0, 4);
                h[4] = 9;
                h.to_vec()
            },
            "version 9",
        ),
        (hello([8; 16], 2, 0, 4).to_vec(), "another communicator"),
        (hello([7; 16], 3, 0, 4).to_vec(), "rank 3 of 4"),
        (wire::encode_header(&FrameHeader::control(FrameKind::Heartbeat, [7; 16], 2, 0)).to_vec(), "Heartbeat"),
    ];
    for (bytes, what) in cases {
        let e = hello_from(&bytes).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Protocol, "{e}");
        assert!(e.to_string().contains(what), "{what}: {e}");
    }
    // Truncated: the peer closes mid-hello.
    assert_eq!(hello_from(&hello([7; 16], 2, 0, 4)[..40]).unwrap_err().kind(), ErrorKind::Io);
}

/// An answer that comes after its query stopped waiting is not taken for the next query's:
/// each query has a number, which its answer repeats.
#[test]
fn a_late_flight_answer_is_not_taken_for_the_next_query() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let deadline = Instant::now() + Duration::from_secs(20);
    let mesh = loopback([3; 16], 2, Duration::from_secs(60), deadline).unwrap();
    let answered = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&answered);
    mesh.set_flight(&crate::transport::tcp::FlightSource(Arc::new(move |_| {
        let k = count.fetch_add(1, Ordering::SeqCst);
        // Rank 1 is slow to answer: the first answer comes after its asker stopped waiting,
        // and the second one a while after the first.
        std::thread::sleep(Duration::from_millis(if k == 0 { 400 } else { 200 }));
        Some(format!("answer {k}").into_bytes())
    })));
    assert!(mesh.ask_flight(0, &[1], Duration::from_millis(50)).is_empty());
    // The first answer arrives while the second query waits: not its answer.
    assert_eq!(mesh.ask_flight(0, &[1], Duration::from_secs(10)), vec![(1, b"answer 1".to_vec())]);
    assert_eq!(answered.load(Ordering::SeqCst), 2);
}

/// While the sending rank writes a frame from its own thread (outside the outbox's lock,
/// `Peer::direct_large`), nothing else goes on the socket: a control frame pushed meanwhile
/// (a credit from the reader task) waits in the queue, neither written directly nor taken by
/// the writer task, and goes once the rank is done and wakes the task.
#[test]
fn nothing_cuts_into_a_frame_the_rank_writes() {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mesh = loopback([5; 16], 2, Duration::from_secs(60), deadline).unwrap();
    let (e, p) = mesh.pair(0, 1).unwrap();
    let out = || super::super::lock(&p.out);
    out().rank_writing = true;
    let frame = e.control(FrameKind::Heartbeat, &[]);
    p.push_control(frame.clone());
    std::thread::sleep(Duration::from_millis(100));
    // (The writer's own heartbeat, if one came meanwhile, queues behind it.)
    assert!(out().control.front() == Some(&frame), "a frame went on the socket while the rank was writing one");
    out().rank_writing = false;
    p.wake.notify_one();
    let until = Instant::now() + Duration::from_secs(10);
    while !out().control.is_empty() {
        assert!(Instant::now() < until, "the writer task never sent the queued frame");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Forms a mesh of 2 ranks of which only `here` lives in this process, the other's process
/// gone (nothing listens where it registered): `PeerLost` naming it, at once, saying `says`.
fn member_gone(here: Rank, says: &str) {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let gone = l.local_addr().unwrap();
    drop(l);
    let mine = "127.0.0.1:9".parse().unwrap();
    let (addrs, local) = if here == 0 { ([mine, gone], [true, false]) } else { ([gone, mine], [false, true]) };
    let start = Instant::now();
    let deadline = start + Duration::from_secs(20);
    let Err(e) = process_mesh([5; 16], 2, &addrs, &local, Duration::from_secs(5), true, deadline) else {
        panic!("a mesh with a member that is gone")
    };
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}: {e}", start.elapsed());
    assert_eq!(e.kind(), ErrorKind::PeerLost, "{e}");
    assert_eq!((e.context().rank, e.context().peer), (Some(here), Some(1 - here)), "{e}");
    assert!(e.to_string().contains(says), "{e}");
}

/// A member whose process is gone once the group formed is `PeerLost` naming it at once:
/// the others retried the connection until their deadline, then blamed it with a `Timeout`
/// (a split's first member killed as the child formed; a stranger's review).
#[test]
fn a_member_gone_after_the_rendezvous_is_peer_lost_at_once() {
    member_gone(1, "rank 0's process refused the connection");
}

/// The same for a member that should call this one (a higher rank): the wait for its call
/// knocks at its process's listener and ends with `PeerLost` naming it once nothing listens
/// there. It waited out the deadline, then blamed it with a `Timeout` ("rank 1 did not
/// connect to rank 0"; a stranger's review of splits).
#[test]
fn a_higher_member_gone_after_the_rendezvous_is_peer_lost_at_once() {
    member_gone(0, "rank 1 did not connect to rank 0, and its process no longer listens");
}

/// A caller that is alive but late (its listener answers the knocks) is waited for and its
/// call taken: knocking never gives up on a live process.
#[test]
fn a_late_caller_that_still_listens_is_waited_for() {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let alive = l.local_addr().unwrap();
    let comm = [11; 16];
    let knocks = std::thread::spawn(move || {
        // Answers knocks (they close at once) until the call is made.
        l.set_nonblocking(true).unwrap();
        let mut n = 0;
        let end = Instant::now() + Duration::from_millis(1800);
        while Instant::now() < end {
            if l.accept().is_ok() {
                n += 1;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        n
    });
    let caller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1800));
        // The call, as this process's listener would hand it to the inbox.
        let pair = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let c = TcpStream::connect(pair.local_addr().unwrap()).unwrap();
        let h = wire::decode_header(&hello(comm, 1, 0, 2), Limits { max_data: 0 }).unwrap();
        inbox::arrive(&h, pair.accept().unwrap().0).unwrap();
        c
    });
    let start = Instant::now();
    let got = inbox::take(comm, (0, 1), 2, Some(alive), start + Duration::from_secs(20));
    let _keep = caller.join().unwrap();
    assert!(got.is_ok(), "{:?}", got.err());
    assert!(knocks.join().unwrap() >= 1, "the wait knocked at the live caller's listener");
}
