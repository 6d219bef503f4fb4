//! `StagedDevice`: the host device, except that the host may not touch its buffers.
//!
//! Every method delegates to [`HostDevice`] but [`Device::host_view`], which returns `None`.
//! The scheduler then cannot lend tensor memory to peers and must copy through its host
//! staging buffers (download before a send, upload or `reduce_host` after a receive) — the
//! path GPU devices take — so the whole suite checks that path on any machine.

use std::cell::Cell;
use std::time::Instant;

use ruccl::mem::HostMem;
use ruccl::types::{Combine, Scale};
use ruccl::{DType, Device, HostDevice, Rank, Result};

use crate::harness::{Opts, TestDevice, run};

thread_local! {
    /// Device-to-host copies made by `StagedDevice`s on this thread (the scheduler runs on the
    /// calling rank's thread), to check that the staging path really runs.
    static DOWNLOADS: Cell<usize> = const { Cell::new(0) };
}

/// The host device behind an opaque-buffer contract.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StagedDevice(HostDevice);

impl TestDevice for StagedDevice {
    fn for_rank(rank: Rank) -> Self {
        StagedDevice(HostDevice::for_rank(rank))
    }
    fn foreign(rank: Rank) -> Self {
        StagedDevice(HostDevice::foreign(rank))
    }
}

impl Device for StagedDevice {
    type Buffer = HostMem;

    fn describe(&self) -> String {
        self.0.describe()
    }

    fn same_device(&self, other: &Self) -> bool {
        self.0.same_device(&other.0)
    }

    fn supports(&self, dtype: DType) -> bool {
        self.0.supports(dtype)
    }

    fn alloc(&self, bytes: usize) -> Result<HostMem> {
        self.0.alloc(bytes)
    }

    fn len(&self, buf: &HostMem) -> usize {
        self.0.len(buf)
    }

    fn mem_id(&self, buf: &HostMem) -> usize {
        self.0.mem_id(buf)
    }

    fn upload(&self, dst: &HostMem, off: usize, src: &[u8]) -> Result<()> {
        self.0.upload(dst, off, src)
    }

    fn download(&self, src: &HostMem, off: usize, dst: &mut [u8]) -> Result<()> {
        DOWNLOADS.with(|d| d.set(d.get() + 1));
        self.0.download(src, off, dst)
    }

    fn copy(&self, src: &HostMem, src_off: usize, dst: &HostMem, dst_off: usize, len: usize) -> Result<()> {
        self.0.copy(src, src_off, dst, dst_off, len)
    }

    fn reduce_host(
        &self,
        dst: &HostMem,
        dst_off: usize,
        acc: &HostMem,
        acc_off: usize,
        incoming: &[u8],
        dtype: DType,
        combine: Combine,
    ) -> Result<()> {
        self.0.reduce_host(dst, dst_off, acc, acc_off, incoming, dtype, combine)
    }

    fn scale(
        &self,
        src: &HostMem,
        src_off: usize,
        dst: &HostMem,
        dst_off: usize,
        count: usize,
        dtype: DType,
        scale: Scale,
    ) -> Result<()> {
        self.0.scale(src, src_off, dst, dst_off, count, dtype, scale)
    }

    /// The one difference: the host may not read or write these buffers in place.
    fn host_view(&self, _buf: &HostMem) -> Option<HostMem> {
        None
    }

    fn synchronize(&self, deadline: Option<Instant>) -> Result<()> {
        self.0.synchronize(deadline)
    }
}

/// Sends from a `StagedDevice` are downloaded into host staging, so the suite stamped out
/// for it really runs the staging path.
#[test]
fn staged_device_takes_the_staging_path() {
    run::<StagedDevice, _>(3, &Opts::default(), |ctx| {
        let mut t = ctx.tensor(&[1.0f32, 2.0, 3.0]);
        let before = DOWNLOADS.with(Cell::get);
        ctx.ok(ctx.comm.all_reduce(&mut t, ruccl::ReduceOp::Sum), "all_reduce");
        let staged = DOWNLOADS.with(Cell::get) - before;
        assert!(staged >= 1, "rank {}: no download during all_reduce: nothing was staged", ctx.rank);
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![3.0, 6.0, 9.0]);
    });
}
