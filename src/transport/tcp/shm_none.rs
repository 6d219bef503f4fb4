//! The shared-memory side of a link where there is none (other systems, Miri): a type with no
//! values, so every branch on a pair's segment compiles away.

#[derive(Debug)]
pub(crate) enum ShmPeer {}
impl ShmPeer {
    pub(super) fn new(p: std::convert::Infallible, _local_peers: usize) -> Self {
        match p {}
    }
    pub(super) fn delivered(&self) -> u64 {
        match *self {}
    }
    pub(super) fn is_drained(&self) -> bool {
        match *self {}
    }
    pub(super) fn poll_inline(&self, _: &super::Endpoint, _: &super::Peer) -> bool {
        match *self {}
    }
    pub(super) fn in_ring(&self, _: &crate::mem::HostMem) -> bool {
        match *self {}
    }
    pub(super) fn accept(&self, _: u64) {
        match *self {}
    }
    pub(super) fn release(&self, _: u64) {
        match *self {}
    }
    pub(super) fn poke(&self) {
        match *self {}
    }
    pub(super) fn set_polling(&self, _: bool) {
        match *self {}
    }
    pub(super) fn send(&self, _: &super::Endpoint, _: &super::Peer, _: super::Header, _: super::Payload) -> u64 {
        match *self {}
    }
}
impl ShmPeer {
    pub(super) fn lent_pending(&self, _: &super::Peer, _: u64) -> bool {
        match *self {}
    }
    pub(super) fn revoke_lent(&self, _: &super::Peer) -> bool {
        match *self {}
    }
    pub(super) fn fetch(
        &self,
        _: &super::Endpoint,
        _: &super::Peer,
        _: &mut super::peer::InMsg,
        _: Option<&crate::mem::HostRegion>,
    ) -> crate::Result<Option<crate::mem::HostRegion>> {
        match *self {}
    }
}
pub(super) fn flush(_: &super::Peer, _: std::time::Instant) {}
pub(crate) fn before_park() {}
pub(super) fn parks() -> u64 {
    0
}
