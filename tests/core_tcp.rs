//! The core suite (`tests/core.rs`) over loopback TCP: every rank its own TCP endpoint
//! ([`ruccl::config::Transport::Tcp`]), so every collective and error case also runs over
//! sockets — `tcp`: ranks sharing one test device (`staged_device::TcpDevice`), `tcp_host`: the
//! host device (`staged_device::TcpHostDevice`).
//!
//! Run with `cargo test --test core_tcp`. A binary of its own so that it compiles alongside
//! `core` rather than after it. Test names read `<device>::<test>` or
//! `<device>::<test>::w<world size>`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]
// The suite's helpers that only the in-process devices' tests use.
#![allow(dead_code)]

include!("core/suite.rs");

core_suite!(tcp, crate::staged_device::TcpDevice, sockets);
core_suite!(tcp_host, crate::staged_device::TcpHostDevice, sockets);
