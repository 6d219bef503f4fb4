//! The `serde` feature: configurations and ids as JSON, as a launcher script or a job file
//! would hold them. `cargo test --features serde --test serde` (CI runs it in the GPU step,
//! whose build has every feature, so it needs no library build of its own).
#![allow(clippy::unwrap_used, missing_docs)]

use std::time::Duration;

use ruccl::api::{CollectiveConfig, Strategy};
use ruccl::config::{DEFAULT_TIMEOUT, Transport};
use ruccl::{Algorithm, CommConfig, DType, ReduceOp, UniqueId};

/// A config file that names only some settings gets the defaults for the others.
#[test]
fn serde_partial_json_uses_defaults() {
    let c: CollectiveConfig =
        serde_json::from_str(r#"{"num_devices": 3, "local": {"all_reduce": {"Tree": 4}}}"#).unwrap();
    assert_eq!(c.num_devices(), 3);
    assert_eq!(c.local_all_reduce_strategy(), Strategy::Tree(4));
    assert_eq!(c.local_reduce_strategy(), Strategy::Auto);
    assert_eq!(c.timeout(), DEFAULT_TIMEOUT);
}

/// Every serializable type comes back equal; a `UniqueId` travels as its string form, so a
/// damaged one is refused with the parser's error rather than accepted.
#[test]
fn round_trips_and_a_damaged_id_is_refused() {
    let id = UniqueId::new().unwrap();
    let json = serde_json::to_string(&id).unwrap();
    assert_eq!(serde_json::from_str::<UniqueId>(&json).unwrap(), id);
    let damaged = format!("\"{}\"", &id.to_string()[..10]);
    assert!(serde_json::from_str::<UniqueId>(&damaged).is_err());

    let cfg = CommConfig::default()
        .with_timeout(Duration::from_millis(1500))
        .with_algorithm(Algorithm::Ring)
        .with_transport(Transport::Tcp);
    let back: CommConfig = serde_json::from_str(&serde_json::to_string(&cfg).unwrap()).unwrap();
    assert_eq!(back.timeout(), cfg.timeout());
    assert_eq!(back.algorithm(), Algorithm::Ring);
    assert_eq!(back.transport(), Transport::Tcp);

    for d in [DType::F32, DType::BF16, DType::U8] {
        assert_eq!(serde_json::from_str::<DType>(&serde_json::to_string(&d).unwrap()).unwrap(), d);
    }
    for op in [ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max] {
        assert_eq!(serde_json::from_str::<ReduceOp>(&serde_json::to_string(&op).unwrap()).unwrap(), op);
    }
    let peer = CollectiveConfig::default().with_num_devices(4).with_local_all_reduce_strategy(Strategy::Ring);
    let back: CollectiveConfig = serde_json::from_str(&serde_json::to_string(&peer).unwrap()).unwrap();
    assert_eq!(back.num_devices(), 4);
    assert_eq!(back.local_all_reduce_strategy(), Strategy::Ring);
}
