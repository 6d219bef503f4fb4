//! The rendezvous between processes, over real sockets on this host: roots that leave or
//! never listen, refused joins, strangers on the port, ranks that die or restart while joining.

use super::*;

/// Sends `frame` to `root` and reads the root's answer: the error it refused with.
fn refused(root: std::net::SocketAddr, frame: &[u8]) -> CollectiveError {
    let mut s = TcpStream::connect(root).unwrap();
    s.write_all(frame).unwrap();
    refusal(&mut s)
}

/// The root's answer on `s`: the error it refused with.
fn refusal(s: &mut TcpStream) -> CollectiveError {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut hb = [0u8; HEADER_LEN];
    s.read_exact(&mut hb).unwrap();
    let h = wire::decode_header(&hb, Limits { max_data: 0 }).unwrap();
    assert_eq!(h.kind, FrameKind::Abort);
    let mut body = vec![0u8; h.len as usize];
    s.read_exact(&mut body).unwrap();
    wire::decode_error(&body).unwrap()
}

/// A fresh id rooted in this process's listener, and the listener's address; `None` (the
/// test says it is skipped) when this machine cannot listen on a socket.
fn rooted() -> Option<(UniqueId, std::net::SocketAddr)> {
    let id = UniqueId::new().unwrap();
    let root = id.root_address();
    if root.is_none() {
        eprintln!("skipped: this machine cannot listen on a socket");
    }
    root.map(|r| (id, r))
}

fn registration(id: &UniqueId) -> Registration {
    let at = ProcAddr { token: [1; 16], addr: "127.0.0.1:9".parse().unwrap() };
    let timeout = Duration::from_millis(300);
    Registration {
        id: id.clone(),
        rank: 1,
        world: 2,
        at,
        timeout,
        chunk_bytes: 1 << 20,
        algorithm: Default::default(),
        peer_silence: crate::config::DEFAULT_PEER_SILENCE,
    }
}

/// A root whose process goes away after the registration (rank 0 that gave up and
/// exited): `PeerLost` saying so, not a protocol error blaming the port.
#[test]
fn a_root_that_closes_before_answering_is_peer_lost() {
    let Ok(l) = std::net::TcpListener::bind("127.0.0.1:0") else {
        eprintln!("skipped: this machine cannot listen on a socket");
        return;
    };
    let root = l.local_addr().unwrap();
    let gone = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut b = [0u8; HEADER_LEN];
        s.read_exact(&mut b).unwrap();
    });
    // Made by `UniqueId::new` in a process that is gone: named as such (it read "the process
    // that made the id (rank 0 of a launch)" whatever made it).
    let id = UniqueId::new().unwrap().rooted_at(root);
    let config = CommConfig::default().with_timeout(Duration::from_secs(10));
    let Err(e) = join(&id, 2, 1, Arc::new(()), true, &config) else { panic!("joined a root that left") };
    gone.join().unwrap();
    assert_eq!(e.kind(), ErrorKind::PeerLost, "{e}");
    assert!(e.to_string().contains("closed the connection before answering"), "{e}");
    assert!(e.to_string().contains("the process that made the id with UniqueId::new exited or crashed"), "{e}");
    assert!(!e.to_string().contains("rank 0 of a launch"), "{e}");
    assert!(format!("{e:?}").contains("gave up waiting for ranks that never started"), "{e:?}");
}

/// A rank of another process that dies in the rendezvous of a communicator no rank of which
/// can be started again (a split's child: its id is derived, handed out only by the split)
/// fails the room for every rank at once, naming it, whether it died before the others came
/// or while they waited. They waited out their whole timeout (10 minutes by default) for a
/// restart that cannot come.
#[test]
fn a_joiner_of_a_split_child_that_died_fails_every_rank_at_once() {
    let Some((parent, root)) = rooted() else { return };
    for (salt, dies_first) in [(1, true), (2, false)] {
        let child = parent.derive(7, &[salt]);
        assert!(!child.restartable());
        // Of 3 ranks, rank 2 never comes: the room is not complete when rank 1 dies.
        let mut reg = registration(&child);
        (reg.timeout, reg.world) = (Duration::from_secs(30), 3);
        let config = CommConfig::default().with_timeout(Duration::from_secs(30));
        let start = Instant::now();
        let local = std::thread::spawn(move || {
            if dies_first {
                std::thread::sleep(Duration::from_millis(600));
            }
            crate::Communicator::with_config(crate::HostDevice::default(), 3, child, 0, config).map(|_| ())
        });
        let dead = register(root, &reg);
        std::thread::sleep(Duration::from_millis(if dies_first { 50 } else { 300 }));
        drop(dead);
        let e = local.join().unwrap().unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(10), "took {:?}: {e}", start.elapsed());
        assert_eq!(e.kind(), ErrorKind::PeerLost, "{e}");
        assert_eq!(e.context().peer, Some(1), "{e}");
        assert!(e.to_string().contains("rank 1 of another process left the rendezvous"), "{e}");
        assert!(e.to_string().contains("no rank of this communicator can be started again"), "{e}");
    }
}

/// Nothing listens where the id says its root is (its process never started, or exited):
/// `Timeout` at this rank's deadline, saying so, with advice about the process that roots
/// the id and the address rather than the generic "the ranks named above" (this error names
/// no rank). Which process that is depends on the id: a launch's rank 0, the process that
/// made the id (told to start "rank 0", a rank 0 whose id a helper process had made and
/// exited was told to start itself), or a split's first member.
#[test]
fn a_root_that_never_listens_is_a_timeout_about_the_root_process() {
    let Ok(l) = std::net::TcpListener::bind("127.0.0.1:0") else {
        eprintln!("skipped: this machine cannot listen on a socket");
        return;
    };
    let root = l.local_addr().unwrap();
    drop(l);
    let made = UniqueId::new().unwrap().rooted_at(root);
    let launch = UniqueId::for_launch(root, None);
    let split = UniqueId::from_parts([9; 16], Some(root));
    for (id, who, what) in [
        (made, "the process that made the id with UniqueId::new", "keep it running until every rank has joined"),
        (launch, "rank 0 of the launch", "start rank 0 with the others"),
        (split, "a split's first member", "start it with the others"),
    ] {
        let config = CommConfig::default().with_timeout(Duration::from_millis(300));
        let start = std::time::Instant::now();
        let Err(e) = join(&id, 2, 0, Arc::new(()), true, &config) else { panic!("joined a root that is not there") };
        assert!(start.elapsed() < Duration::from_secs(10), "waited {:?}", start.elapsed());
        assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
        let s = e.to_string();
        assert!(s.contains("could not reach the rendezvous root") && s.contains(&root.to_string()), "{s}");
        assert!(s.contains(who) && s.contains(what) && !s.contains("named above"), "{s}");
        assert!(s.contains("it may have started and failed already"), "{s}");
        if !id.is_launch() {
            assert!(!s.contains("start rank 0"), "{s}");
        }
    }
}

/// The root's `Timeout` for a room that was not complete reaches a rank of another process
/// with this side's advice (nothing was created: call again), not the generic one of a
/// failed op ("this communicator is now aborted, create a new one").
#[test]
fn a_rooms_timeout_says_nothing_was_created() {
    let Some((id, _)) = rooted() else { return };
    let config = CommConfig::default().with_timeout(Duration::from_millis(300));
    let Err(e) = join(&id, 2, 1, Arc::new(()), true, &config) else { panic!("joined without rank 0") };
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    let text = format!("{e:?}");
    assert!(text.contains("nothing was created, so call Communicator::new (or from_env) again"), "{text}");
    assert!(!text.contains("create a new one"), "{text}");
}

/// A second launch given a running job's MASTER_ADDR:MASTER_PORT reaches that job's rank
/// 0: its ranks are refused with an error that says so and what to do, relayed from the
/// root's process, and the running group is left alone.
#[test]
fn a_join_of_a_running_group_is_refused_naming_its_rendezvous() {
    let Some((id, root)) = rooted() else { return };
    let running = crate::Communicator::new(crate::HostDevice::default(), 1, id.clone(), 0).unwrap();
    let config = CommConfig::default().with_timeout(Duration::from_secs(10));
    let Err(e) = join(&id, 2, 1, Arc::new(()), true, &config) else { panic!("joined a running group") };
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let s = e.to_string();
    assert!(s.contains(&format!("rendezvous is at {root},")) && s.contains("MASTER_ADDR:MASTER_PORT"), "{s}");
    assert!(s.contains("What to do: fix what the rendezvous root's refusal above says"), "{s}");
    assert_eq!(e.context().rank, Some(1), "{e}");
    assert!(running.barrier().is_ok());
}

/// A registration for an id of `UniqueId::new`'s kind that the root's process never made
/// (a stale id of an earlier run, at the same address) is refused at once, saying so;
/// it waited out the rank's timeout for a group that never forms.
#[test]
fn an_id_of_an_earlier_run_is_refused_at_once() {
    let Some((id, root)) = rooted() else { return };
    let mut stale = registration(&id.of_another_run());
    stale.timeout = Duration::from_secs(30);
    let start = Instant::now();
    let e = refused(root, &proto::encode_register(&stale));
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("never made: the UniqueId is from an earlier run"), "{e}");
}

/// A world size no job has, from another process (a typo in its WORLD_SIZE) or from this
/// one: refused before anything is allocated per rank (the root's process aborted,
/// allocating hundreds of GB), and the listener keeps serving.
#[test]
fn an_impossible_world_size_is_refused() {
    let Some((id, root)) = rooted() else { return };
    let mut huge = registration(&id);
    huge.world = 3_000_000_000;
    let e = refused(root, &proto::encode_register(&huge));
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("world_size 3000000000 is more than ruCCL's limit"), "{e}");
    let e = crate::Communicator::new(crate::HostDevice::default(), usize::MAX, id.clone(), 0).unwrap_err();
    assert_eq!((e.kind(), e.context().rank), (ErrorKind::InvalidArgument, Some(0)), "{e}");
    let e = refused(root, &proto::encode_register(&registration(&id)));
    assert_eq!(e.kind(), ErrorKind::Timeout, "the listener still serves: {e}");
}

/// Registers `reg` at `root` and returns the open connection.
fn register(root: std::net::SocketAddr, reg: &Registration) -> TcpStream {
    let mut s = TcpStream::connect(root).unwrap();
    s.write_all(&proto::encode_register(reg)).unwrap();
    s
}

/// A rank of another process that registered and then died (its connection closed)
/// leaves the room: rank 0, arriving after, is not handed a table with a dead rank in it
/// (it then waited a second timeout connecting to it), and its error at the deadline is
/// `PeerLost` naming rank 1 as gone, not a rank that never came.
#[test]
fn a_joiner_whose_process_died_leaves_the_room_and_is_named() {
    let Some((id, root)) = rooted() else { return };
    let mut reg = registration(&id);
    reg.timeout = Duration::from_secs(30);
    drop(register(root, &reg));
    std::thread::sleep(Duration::from_millis(400));
    let config = CommConfig::default().with_timeout(Duration::from_millis(800));
    let start = Instant::now();
    let e = crate::Communicator::with_config(crate::HostDevice::default(), 2, id, 0, config).unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
    assert_eq!(e.kind(), ErrorKind::PeerLost, "{e}");
    assert!(e.to_string().contains("rank(s) 1 joined from another process, which then went away"), "{e}");
}

/// A joiner whose process died just before the last rank came (before its waiter's next
/// look) does not complete the room: a table naming the dead process made the others wait out
/// a second timeout connecting to it (seen in CI: a rank killed, the others started at once).
#[test]
fn a_joiner_that_died_just_before_the_last_rank_came_is_not_in_the_table() {
    let Some((id, root)) = rooted() else { return };
    let mut reg = registration(&id);
    reg.timeout = Duration::from_secs(30);
    let dead = register(root, &reg);
    std::thread::sleep(Duration::from_millis(30));
    drop(dead);
    let config = CommConfig::default().with_timeout(Duration::from_millis(800));
    let e = crate::Communicator::with_config(crate::HostDevice::default(), 2, id, 0, config).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PeerLost, "{e}");
    assert!(e.to_string().contains("rank(s) 1 joined from another process, which then went away"), "{e}");
}

/// A rank restarted after its process died in the rendezvous takes its place, rather than
/// being refused as a second rank of that number (which failed the whole group).
#[test]
fn a_restarted_joiner_takes_the_place_of_its_dead_process() {
    let Some((id, root)) = rooted() else { return };
    for pause in [0, 300] {
        let mut first = registration(&id);
        first.timeout = Duration::from_secs(30);
        let dead = register(root, &first);
        std::thread::sleep(Duration::from_millis(50));
        drop(dead);
        std::thread::sleep(Duration::from_millis(pause));
        // The restart: rank 0 never comes, so its own timeout names rank 0, not a duplicate.
        let mut again = registration(&id);
        again.at.token = [2; 16];
        let e = refusal(&mut register(root, &again));
        assert_eq!(e.kind(), ErrorKind::Timeout, "pause {pause}: {e}");
        assert!(e.to_string().contains("rank(s) 0 never called"), "pause {pause}: {e}");
    }
}

#[test]
fn strangers_are_refused_and_the_listener_keeps_serving() {
    let Some((id, root)) = rooted() else { return };
    // Garbage and silence: the connection is closed, the listener goes on.
    let mut g = TcpStream::connect(root).unwrap();
    g.write_all(&b"GET / HTTP/1.1\r\n\r\n".repeat(8)).unwrap();
    let _silent = TcpStream::connect(root).unwrap();
    // An id rooted elsewhere.
    let elsewhere = UniqueId::from_parts([9; 16], Some("10.255.255.1:1".parse().unwrap()));
    let e = refused(root, &proto::encode_register(&registration(&elsewhere)));
    assert_eq!(e.kind(), ErrorKind::Protocol, "{e}");
    assert!(e.to_string().contains("not rooted in this process"), "{e}");
    // A malformed registration (truncated body, announced as such).
    let mut f = proto::encode_register(&registration(&id));
    f.truncate(f.len() - 3);
    let len = (f.len() - HEADER_LEN) as u64;
    f[40..48].copy_from_slice(&len.to_le_bytes());
    assert_eq!(refused(root, &f).kind(), ErrorKind::Protocol);
    // A real registration is still served: rank 0 never comes, so the root names it.
    let e = refused(root, &proto::encode_register(&registration(&id)));
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert!(e.to_string().contains("rank(s) 0 never called"), "{e}");
}

/// A rank arriving just after its group's room filled (a second process claiming the same
/// rank, or a second job on the port), while the group's processes connect: refused as a
/// join of a group that exists. It opened a new room and waited out its timeout, blaming
/// rank 0. Once the build fails (the marker removed), the id is free again.
#[test]
fn a_join_while_the_group_connects_is_refused_as_in_use() {
    let Some((id, root)) = rooted() else { return };
    let mut first = registration(&id);
    first.timeout = Duration::from_secs(30);
    let _rank1 = register(root, &first);
    let config = CommConfig::default().with_timeout(Duration::from_secs(10));
    let here: Vec<super::super::Entrant> = vec![(0, Arc::new(()), None)];
    let Ok(Joined::Table(table)) = super::super::enter(&id, 2, &here, None, &config) else {
        panic!("the room did not fill")
    };
    // The table went out; this process has not built its side yet.
    let mut dup = registration(&id);
    dup.at.token = [2; 16];
    let e = refusal(&mut register(root, &dup));
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("is in use by a communicator"), "{e}");
    // A failed build lets go of the id: a later join opens a room (rank 0 never comes).
    super::super::Instance::unmark(&mut super::super::registry(), &id, table.nonce);
    let mut later = registration(&id);
    later.at.token = [3; 16];
    let e = refusal(&mut register(root, &later));
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert!(e.to_string().contains("rank(s) 0 never called"), "{e}");
}

/// A rank of another launch (another job on the same MASTER_ADDR:MASTER_PORT, its launcher's
/// job id another) registering at a launch's root is refused at once, saying so: it joined
/// the other job's group when the shapes allowed, the two jobs exchanging data with no error.
#[test]
fn a_rank_of_another_launch_is_refused_at_once() {
    let Some((_, root)) = rooted() else { return };
    let ours = UniqueId::for_launch(root, Some("mpirun 1"));
    listener::root_launch(&ours);
    let mut theirs = registration(&UniqueId::for_launch(root, Some("mpirun 2")));
    theirs.timeout = Duration::from_secs(30);
    let start = Instant::now();
    let e = refused(root, &proto::encode_register(&theirs));
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("rank 1 is of another launch than the one whose rank 0 listens at"), "{e}");
    // This launch's own ranks are still served (rank 0 never comes: the room's timeout,
    // which names the other launch's rank it refused).
    let e = refused(root, &proto::encode_register(&registration(&ours)));
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert!(e.to_string().contains("rank(s) 1 of another launch (its launcher's job id differs) came"), "{e}");
}

/// A rank alone with an id its process made, nobody of another process in its room: each
/// process that made its own `UniqueId::new` waits in a group of its own, and is told so.
#[test]
fn a_room_no_other_process_joined_says_to_hand_the_id_over() {
    let Some((id, _)) = rooted() else { return };
    let config = CommConfig::default().with_timeout(Duration::from_millis(300));
    let e = crate::Communicator::with_config(crate::HostDevice::default(), 2, id.clone(), 0, config).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert!(e.to_string().contains(&format!("no rank of another process joined this id, {id}")), "{e}");
    // A launch's id (not made by UniqueId::new) has nothing to hand over.
    let launch = UniqueId::for_launch(id.root_address().unwrap(), Some("x"));
    let config = CommConfig::default().with_timeout(Duration::from_millis(300));
    let e = crate::Communicator::with_config(crate::HostDevice::default(), 2, launch, 0, config).unwrap_err();
    assert!(!e.to_string().contains("no rank of another process"), "{e}");
}
