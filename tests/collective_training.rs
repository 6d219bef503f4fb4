//! The resumable collective-training example (`--features burn`): `run` trains two updates and
//! saves the state after the first; `resume` restores it and must reproduce the second update
//! bit for bit. Both are called in this process, from the example's own source.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[allow(dead_code)]
#[path = "../examples/collective_training.rs"]
mod example;

#[test]
fn resume_reproduces_run_bit_for_bit() {
    let dir = std::env::temp_dir().join(format!(
        "ruccl-collective-training-{}-{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
    ));
    let ran = example::run(&dir).unwrap();
    assert!(example::run(&dir).is_err(), "run must refuse an existing directory");
    let resumed = example::resume(&dir).unwrap();
    assert_eq!(ran, resumed);
    std::fs::remove_dir_all(&dir).unwrap();
}
