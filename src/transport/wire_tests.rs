//! The codec's tests: the code tables never move, every frame kind round-trips, and a million
//! random and mutated frames neither panic nor decode into anything but a canonical frame
//! within the receiver's bound.

use super::*;
use crate::types::Rank;

/// A seeded xorshift (no dependency, reproducible).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The published codes. A failure here means the wire format changed: bump [`VERSION`].
#[test]
fn codes_never_move() {
    let kinds: Vec<u8> = [
        FrameKind::Data,
        FrameKind::Abort,
        FrameKind::Goodbye,
        FrameKind::Hello,
        FrameKind::Heartbeat,
        FrameKind::FlightQuery,
        FrameKind::FlightAnswer,
        FrameKind::Credit,
        FrameKind::Register,
        FrameKind::Table,
    ]
    .iter()
    .map(|&k| code_of(&KINDS, k))
    .collect();
    assert_eq!(kinds, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    let ops: Vec<u8> = [
        OpKind::AllReduce,
        OpKind::Broadcast,
        OpKind::Reduce,
        OpKind::AllGather,
        OpKind::ReduceScatter,
        OpKind::AllToAll,
        OpKind::Gather,
        OpKind::Scatter,
        OpKind::Send,
        OpKind::Recv,
        OpKind::Barrier,
        OpKind::Split,
    ]
    .iter()
    .map(|&k| code_of(&OP_KINDS, k))
    .collect();
    assert_eq!(ops, (1..=12).collect::<Vec<u8>>());
    let dtypes: Vec<u8> = DType::ALL.iter().map(|&d| code_of(&DTYPES, d)).collect();
    assert_eq!(dtypes, (1..=10).collect::<Vec<u8>>());
    let reduces: Vec<(u8, u64)> = [
        None,
        Some(ReduceOp::Sum),
        Some(ReduceOp::Prod),
        Some(ReduceOp::Min),
        Some(ReduceOp::Max),
        Some(ReduceOp::Avg),
        Some(ReduceOp::PreMulSum(2.0)),
    ]
    .iter()
    .map(|&o| reduce_code(o))
    .collect();
    assert_eq!(reduces, [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0), (5, 0), (6, 2.0f64.to_bits())]);
    let algos: Vec<(u8, u32)> = [
        None,
        Some(Algorithm::Auto),
        Some(Algorithm::Ring),
        Some(Algorithm::Tree),
        Some(Algorithm::RecursiveDoubling),
        Some(Algorithm::Direct),
        Some(Algorithm::KaryTree(3)),
        Some(Algorithm::Centralized),
        Some(Algorithm::Exchange),
    ]
    .iter()
    .map(|&a| algorithm_code(a))
    .collect();
    assert_eq!(algos, [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0), (5, 0), (6, 3), (7, 0), (8, 0)]);
    let errors: Vec<u8> = [
        ErrorKind::InvalidArgument,
        ErrorKind::Mismatch,
        ErrorKind::Timeout,
        ErrorKind::PeerLost,
        ErrorKind::Aborted,
        ErrorKind::Unsupported,
        ErrorKind::Device,
        ErrorKind::Io,
        ErrorKind::Protocol,
    ]
    .iter()
    .map(|&k| code_of(&ERROR_KINDS, k))
    .collect();
    assert_eq!(errors, (1..=9).collect::<Vec<u8>>());
    // Every table is a bijection.
    for (i, (_, c)) in KINDS.iter().enumerate() {
        assert!(KINDS[..i].iter().all(|(_, d)| d != c));
    }
}

fn random_desc(rng: &mut Rng) -> OpDesc {
    let kind = OP_KINDS[rng.below(OP_KINDS.len() as u64) as usize].0;
    let dtype = DTYPES[rng.below(DTYPES.len() as u64) as usize].0;
    let mut d = OpDesc::new(kind, dtype, rng.next() as usize >> rng.below(64));
    d.op = match rng.below(8) {
        0 => None,
        1 => Some(ReduceOp::Sum),
        2 => Some(ReduceOp::Prod),
        3 => Some(ReduceOp::Min),
        4 => Some(ReduceOp::Max),
        5 => Some(ReduceOp::Avg),
        _ => Some(ReduceOp::PreMulSum((rng.below(1000) as f64) / 8.0 - 3.0)),
    };
    d.root = (rng.below(2) == 0).then(|| rng.below(1 << 20) as Rank);
    d.peer = (rng.below(2) == 0).then(|| rng.below(1 << 20) as Rank);
    d.in_place = rng.below(2) == 0;
    d.algorithm = match rng.below(10) {
        0 => None,
        1 => Some(Algorithm::Auto),
        2 => Some(Algorithm::Ring),
        3 => Some(Algorithm::Tree),
        4 => Some(Algorithm::RecursiveDoubling),
        5 => Some(Algorithm::Direct),
        6 => Some(Algorithm::Centralized),
        7 => Some(Algorithm::Exchange),
        _ => Some(Algorithm::KaryTree(rng.below(9) as u32)),
    };
    d.shape = (rng.below(2) == 0).then(|| rng.next());
    d.part_of = crate::op::Composite::from_code(rng.below(6) as u8).flatten();
    d
}

fn random_header(rng: &mut Rng, max_data: u64) -> FrameHeader {
    let kind = KINDS[rng.below(KINDS.len() as u64) as usize].0;
    let mut comm = [0u8; 16];
    comm.iter_mut().for_each(|b| *b = rng.next() as u8);
    let mut h = FrameHeader::control(kind, comm, rng.next() as u32, 0);
    match kind {
        FrameKind::Data => {
            h.seq = rng.next();
            h.p2p = rng.below(2) == 0;
            h.index = rng.next() as u32;
            h.fp = Some(random_desc(rng).fingerprint());
            h.len = rng.below(max_data + 1);
        }
        FrameKind::Abort => h.len = rng.below(MAX_CONTROL + 1),
        FrameKind::FlightAnswer => (h.seq, h.len) = (rng.next(), rng.below(MAX_CONTROL + 1)),
        FrameKind::FlightQuery => h.seq = rng.next(),
        FrameKind::Hello => (h.seq, h.index) = (rng.next(), rng.next() as u32),
        FrameKind::Register => (h.index, h.len) = (rng.next() as u32, rng.below(MAX_CONTROL + 1)),
        FrameKind::Table => (h.index, h.len) = (rng.next() as u32, rng.below(MAX_TABLE + 1)),
        FrameKind::Credit => (h.seq, h.index) = (rng.next(), rng.next() as u32),
        _ => {}
    }
    h
}

fn same(a: &FrameHeader, b: &FrameHeader) -> bool {
    (a.kind, a.comm, a.from, a.seq, a.p2p, a.index, a.len) == (b.kind, b.comm, b.from, b.seq, b.p2p, b.index, b.len)
        && match (&a.fp, &b.fp) {
            (None, None) => true,
            // By bits: a mutated scalar may be a NaN, which `OpDesc`'s `==` calls unequal to itself.
            (Some(x), Some(y)) => x.words() == y.words(),
            _ => false,
        }
}

#[test]
fn every_kind_round_trips() {
    let mut rng = Rng(0x1234_5678);
    let limits = Limits { max_data: 1 << 30 };
    for _ in 0..20_000 {
        let h = random_header(&mut rng, limits.max_data);
        let back = decode_header(&encode_header(&h), limits).unwrap();
        assert!(same(&h, &back), "{h:?} came back as {back:?}");
    }
    for kind in KINDS.map(|(k, _)| k) {
        let h = FrameHeader::control(kind, [7; 16], 3, 0);
        if kind != FrameKind::Data {
            assert!(same(&h, &decode_header(&encode_header(&h), limits).unwrap()));
        } else {
            assert_eq!(
                decode_header(&encode_header(&h), limits).unwrap_err(),
                WireError::Code { field: "op kind", code: 0 }
            );
        }
    }
}

#[test]
fn errors_round_trip() {
    let e = CollectiveError::new(ErrorKind::Mismatch, "rank 1 called broadcast — ünïcode")
        .with_rank(2)
        .with_peer(1)
        .with_seq(17)
        .with_op("all_reduce(sum, 4 x f32)")
        .with_report("flight recorder:\n rank 0 ...");
    let back = decode_error(&encode_error(&e)).unwrap();
    assert_eq!((back.kind(), back.message(), back.context()), (e.kind(), e.message(), e.context()));
    assert_eq!(back.report(), e.report());
    let bare = CollectiveError::new(ErrorKind::Aborted, "abort() called");
    let back = decode_error(&encode_error(&bare)).unwrap();
    assert_eq!((back.kind(), back.message(), back.context()), (bare.kind(), bare.message(), bare.context()));
    assert_eq!(back.report(), None);
    // An overlong message is cut (on a character boundary) to fit a control frame.
    let long = CollectiveError::new(ErrorKind::Io, "é".repeat(100_000));
    let enc = encode_error(&long);
    assert!(enc.len() as u64 <= MAX_CONTROL);
    assert!(decode_error(&enc).unwrap().message().chars().all(|c| c == 'é'));
}

#[test]
fn named_errors() {
    let limits = Limits { max_data: 100 };
    let mut h = FrameHeader::control(FrameKind::Data, [1; 16], 0, 101);
    h.fp = Some(OpDesc::new(OpKind::AllReduce, DType::F32, 25).fingerprint());
    let mut b = encode_header(&h);
    let e = decode_header(&b, limits).unwrap_err();
    assert_eq!(e, WireError::TooLong { kind: FrameKind::Data, len: 101, max: 100 });
    let e = CollectiveError::from(e);
    assert_eq!(e.kind(), ErrorKind::Protocol);
    assert!(e.message().contains("101 bytes"), "{e}");
    b[4] = 1;
    let e = CollectiveError::from(decode_header(&b, limits).unwrap_err());
    assert!(e.message().contains("version 1") && e.message().contains(&format!("version {VERSION}")), "{e}");
    b[0] = b'G';
    assert!(matches!(decode_header(&b, limits), Err(WireError::Magic(_))));
    // Another protocol's bytes read as text; others as hex.
    assert_eq!(WireError::Magic(*b"HTTP").to_string(), "bad magic \"HTTP\" (text): the peer is not a ruCCL rank");
    assert_eq!(WireError::Magic([0, 1, 0xab, 0x20]).to_string(), "bad magic 0x0001ab20: the peer is not a ruCCL rank");
    let mut c = encode_header(&FrameHeader::control(FrameKind::Goodbye, [0; 16], 0, 0));
    c[6] = 200;
    assert_eq!(decode_header(&c, limits).unwrap_err(), WireError::Kind(200));
    c[6] = 3;
    c[40] = 1; // a goodbye has no body
    assert!(matches!(decode_header(&c, limits), Err(WireError::TooLong { .. })));
    assert!(matches!(decode_error(&[9; 5]), Err(WireError::Truncated { .. })));
}

/// Random and mutated frames: no panic; whatever decodes is canonical (re-encodes to the same
/// bytes) and within the bound, so a receiver never allocates more than it allowed.
#[test]
fn a_million_random_and_mutated_frames() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut ok, mut refused) = (0u32, 0u32);
    for i in 0..1_000_000u32 {
        let limits = Limits { max_data: rng.below(1 << 24) };
        let mut b = if i % 4 == 0 {
            let mut b = [0u8; HEADER_LEN];
            b.iter_mut().for_each(|x| *x = rng.next() as u8);
            if i % 8 == 0 {
                b[..4].copy_from_slice(&MAGIC);
                b[4..6].copy_from_slice(&VERSION.to_le_bytes());
            }
            b
        } else {
            encode_header(&random_header(&mut rng, limits.max_data))
        };
        if i % 4 != 3 {
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(HEADER_LEN as u64) as usize;
                b[at] ^= 1 << rng.below(8);
            }
        }
        match decode_header(&b, limits) {
            Ok(h) => {
                ok += 1;
                assert_eq!(encode_header(&h), b, "not canonical: {h:?}");
                let max = match h.kind {
                    FrameKind::Data => limits.max_data,
                    FrameKind::Table => MAX_TABLE,
                    _ => MAX_CONTROL,
                };
                assert!(h.len <= max);
            }
            Err(e) => {
                refused += 1;
                assert_eq!(CollectiveError::from(e).kind(), ErrorKind::Protocol);
            }
        }
        if i % 16 == 0 {
            // Abort bodies: valid ones mutated, and noise.
            let e = CollectiveError::new(ErrorKind::Timeout, "x".repeat(rng.below(40) as usize)).with_rank(1);
            let mut body = encode_error(&e);
            let at = rng.below(body.len() as u64) as usize;
            body[at] ^= rng.next() as u8;
            body.truncate(rng.below(body.len() as u64 + 1) as usize);
            let _ = decode_error(&body);
        }
    }
    assert!(ok > 100_000 && refused > 100_000, "{ok} decoded, {refused} refused");
}

/// A receiver's fingerprint memo changes nothing: over runs of frames that repeat a
/// fingerprint (what a peer sends), with mutations of any byte between them, the memo's decode
/// gives the same header or the same error as a plain decode, frame after frame.
#[test]
fn a_fingerprint_memo_decodes_as_decode_header_does() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let limits = Limits { max_data: 1 << 20 };
    let mut memo = FpMemo::default();
    let (mut hits, mut refused) = (0u32, 0u32);
    let mut base = encode_header(&random_header(&mut rng, limits.max_data));
    for i in 0..200_000u32 {
        if i % 8 == 0 {
            let mut h = random_header(&mut rng, limits.max_data);
            if rng.below(4) != 0 {
                h.kind = FrameKind::Data;
                h.fp = Some(random_desc(&mut rng).fingerprint());
            }
            base = encode_header(&h);
        }
        let mut b = base;
        // The fields a peer changes from message to message, and now and then any bit.
        b[28..32].copy_from_slice(&(rng.below(8) as u32).to_le_bytes());
        b[32..40].copy_from_slice(&rng.below(1000).to_le_bytes());
        if rng.below(4) == 0 {
            let at = rng.below(HEADER_LEN as u64) as usize;
            b[at] ^= 1 << rng.below(8);
        }
        let before = memo.0.as_ref().map(|(k, _)| *k);
        match (decode_header_memo(&b, limits, &mut memo), decode_header(&b, limits)) {
            (Ok(m), Ok(d)) => {
                assert!(same(&m, &d) && encode_header(&m) == b, "{m:?} != {d:?}");
                hits +=
                    u32::from(d.kind == FrameKind::Data && before.is_some_and(|k| memo.0.is_some_and(|m| m.0 == k)));
            }
            (Err(m), Err(d)) => {
                assert_eq!(m, d);
                refused += 1;
            }
            (m, d) => panic!("memo {m:?}, plain {d:?}"),
        }
    }
    assert!(hits > 50_000 && refused > 1_000, "{hits} memo hits, {refused} refused");
}
