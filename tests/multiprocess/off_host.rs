//! A device whose memory the library may not treat as host memory (the host device behind a
//! wrapper that says so, as a GPU device would), for processes that mix devices: a process on
//! it says no to the host's exchange slots, so every rank keeps messages.

use std::time::Instant;

use ruccl::device::{Range, Reach, Source};
use ruccl::mem::{HostMem, HostRegion};
use ruccl::types::{Combine, Scale};
use ruccl::{Communicator, DType, Device, HostDevice, Result};

use super::roles::{every_collective, num, var};

/// The host device, claiming no host memory ([`Device::host_memory`] is `false`).
#[derive(Clone, Debug, Default)]
pub(super) struct OffHost(HostDevice);

type Event = <HostDevice as Device>::Event;

impl Device for OffHost {
    type Buffer = HostMem;
    type Event = Event;
    fn describe(&self) -> String {
        format!("off-host {}", self.0.describe())
    }
    fn same_device(&self, other: &Self) -> bool {
        self.0.same_device(&other.0)
    }
    fn reach(&self, other: &Self) -> Reach {
        self.0.reach(&other.0)
    }
    fn supports(&self, dtype: DType) -> bool {
        self.0.supports(dtype)
    }
    fn alloc(&self, bytes: usize) -> Result<HostMem> {
        self.0.alloc(bytes)
    }
    fn alloc_staging(&self, bytes: usize) -> Result<HostMem> {
        self.0.alloc_staging(bytes)
    }
    fn len(&self, buf: &HostMem) -> usize {
        self.0.len(buf)
    }
    fn mem_id(&self, buf: &HostMem) -> usize {
        self.0.mem_id(buf)
    }
    fn write(&self, dst: &HostMem, off: usize, src: &[u8]) -> Result<()> {
        self.0.write(dst, off, src)
    }
    fn read(&self, src: &HostMem, off: usize, dst: &mut [u8]) -> Result<()> {
        self.0.read(src, off, dst)
    }
    fn upload(&self, dst: &Range<HostMem>, src: &HostRegion) -> Result<Event> {
        self.0.upload(dst, src)
    }
    fn download(&self, src: &Range<HostMem>, dst: &HostRegion) -> Result<Event> {
        self.0.download(src, dst)
    }
    fn copy(&self, src: &Range<HostMem>, dst: &Range<HostMem>) -> Result<Event> {
        self.0.copy(src, dst)
    }
    fn reduce(
        &self,
        dst: &Range<HostMem>,
        acc: &Range<HostMem>,
        srcs: &[Source<HostMem>],
        dtype: DType,
        combine: Combine,
    ) -> Result<Event> {
        self.0.reduce(dst, acc, srcs, dtype, combine)
    }
    fn scale(&self, src: &Range<HostMem>, dst: &Range<HostMem>, dtype: DType, scale: Scale) -> Result<Event> {
        self.0.scale(src, dst, dtype, scale)
    }
    fn poll(&self, event: &Event) -> Result<bool> {
        self.0.poll(event)
    }
    fn wait(&self, event: &Event, deadline: Option<Instant>) -> Result<()> {
        self.0.wait(event, deadline)
    }
    fn host_view(&self, buf: &HostMem) -> Option<HostMem> {
        self.0.host_view(buf)
    }
    fn synchronize(&self, deadline: Option<Instant>) -> Result<()> {
        self.0.synchronize(deadline)
    }
}

/// Every collective (f32, i64) as `MP_RANK`, on [`OffHost`] when `MP_OFF_HOST=1` and on the
/// host device otherwise; checks the transport (`MP_SHM`, `MP_SLOTS`).
pub(super) fn mixed_devices_child() -> std::result::Result<(), String> {
    let id: ruccl::UniqueId = var("MP_ID").parse().map_err(|e: ruccl::CollectiveError| e.to_string())?;
    let (world, rank) = (num("MP_WORLD"), num("MP_RANK"));
    fn run<D: Device>(comm: Communicator<D>) -> std::result::Result<(), String> {
        super::roles::check_transport()?;
        every_collective::<f32, _>(&comm, |v| v as f32)?;
        every_collective::<i64, _>(&comm, |v| v as i64)?;
        comm.barrier().map_err(|e| e.to_string())
    }
    if var("MP_OFF_HOST") == "1" {
        run(Communicator::new(OffHost::default(), world, id, rank).map_err(|e| e.to_string())?)
    } else {
        run(Communicator::new(HostDevice::default(), world, id, rank).map_err(|e| e.to_string())?)
    }
}
