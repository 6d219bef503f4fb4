//! The core suite over loopback TCP: `tcp`, `tcp_host` — the shared test device and the host
//! device with every rank its own TCP endpoint on 127.0.0.1
//! ([`ruccl::config::Transport::Tcp`]), so every collective and error case also runs over
//! sockets (`tcp` in the suite's short form, as on the GPU: `tcp_host` and `tests/core.rs`'s
//! `shared` run the longer passes it would repeat). Both leave out the tests that rely on a
//! failure being seen by every rank the instant it happens (`core_suite!`'s `sockets` form).
//!
//! `cargo test --test core_tcp`. A binary of its own, apart from `tests/core.rs` (the same
//! test bodies on the in-process devices): a cold `cargo test` compiles the two side by side
//! on two cores instead of one binary of seven devices on one (~400 s of CPU at the test
//! profile's opt-level, the longest unit of the build).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]
// The suite's helpers that only the in-process devices' tests use.
#![allow(dead_code)]

include!("core/suite.rs");

core_suite!(tcp, crate::staged_device::TcpDevice, sockets);
core_suite!(tcp_host, crate::staged_device::TcpHostDevice, sockets);
