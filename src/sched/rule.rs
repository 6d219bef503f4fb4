//! Whom an exchanged op's rank waits for and whose slots it looks at: the rule that makes
//! ranks disagreeing on an op always find out ([`Looks`]), apart from the exchange that
//! follows it (`exchange.rs`) so that it can be checked on its own, against every order in
//! which ranks reach an op (`rule_tests.rs`).

use crate::op::{OpDesc, OpKind};
use crate::types::Rank;

/// Whose parts a rank's result reads, and so waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reads {
    /// Every peer's.
    Every,
    /// The root's alone (non-roots of broadcast and scatter).
    Root(Rank),
    /// None but its own (a root of broadcast and scatter, non-roots of reduce and gather).
    Own,
}

impl Reads {
    /// What `me`'s result reads: every part, except that a root of broadcast and scatter
    /// reads only its own and non-roots of reduce and gather read none, so these ranks run
    /// ahead of their peers (up to the slots' depth) as an eager root does, and non-roots of
    /// broadcast and scatter wait for the root alone. Ops of the peer API (those that carry a
    /// shape digest) wait for every part: a peer whose own arguments fail enters no op but
    /// aborts the registration, and every other peer must get that error from the same
    /// call, which a rank that ran ahead would not.
    pub(super) fn of(desc: &OpDesc, me: Rank) -> Self {
        let root = desc.root.unwrap_or(0);
        if desc.shape.is_some() {
            return Reads::Every;
        }
        match desc.kind {
            OpKind::Reduce | OpKind::Gather if me == root => Reads::Every,
            OpKind::Reduce | OpKind::Gather => Reads::Own,
            OpKind::Broadcast | OpKind::Scatter if me == root => Reads::Own,
            OpKind::Broadcast | OpKind::Scatter => Reads::Root(root),
            _ => Reads::Every,
        }
    }

    /// The root whose part, once there, spares `me` publishing its own: a non-root of
    /// broadcast or scatter other than the hub (see [`Looks`]).
    pub(super) fn lazy(self, me: Rank) -> Option<Rank> {
        match self {
            Reads::Root(r) if me != HUB => Some(r),
            _ => None,
        }
    }

    /// Whether `me` publishes nothing at all for `desc`: the hub as the root of reduce or
    /// gather (without a shape digest). It waits for every part, so it compares every peer's
    /// call itself, and no peer that agrees with it reads its part (its own part comes from
    /// its input). Its slot is then not rewritten op after op, and the non-roots' look at it
    /// loads a line nobody wrote since they last loaded it, instead of one the root's core has
    /// just taken back. Only the hub: other ranks may all think themselves roots, and a root
    /// that published nothing would leave every such root waiting for parts that never come,
    /// with nobody comparing anything (`rule_tests` finds that order).
    pub(super) fn quiet(desc: &OpDesc, me: Rank) -> bool {
        me == HUB
            && desc.shape.is_none()
            && matches!(desc.kind, OpKind::Reduce | OpKind::Gather)
            && desc.root.unwrap_or(0) == me
    }

    /// Whether `me`'s peers run ahead of it: the root of reduce or gather (without a shape
    /// digest), whose non-roots wait for nobody ([`Reads::Own`]) and so keep up to the slots'
    /// depth of ops ahead. Their parts of its next op are then most likely published already.
    pub(super) fn behind(desc: &OpDesc, me: Rank) -> bool {
        desc.shape.is_none() && matches!(desc.kind, OpKind::Reduce | OpKind::Gather) && desc.root.unwrap_or(0) == me
    }

    /// Which peers' slots `me` looks at once it has published (after a fence), besides those
    /// it waits for; see [`Looks`].
    pub(super) fn looks(self, me: Rank) -> Looks {
        match self {
            Reads::Every => Looks::None,
            _ if me == HUB => Looks::All,
            Reads::Own | Reads::Root(_) => Looks::Hub,
        }
    }
}

/// The rank every exchanged op's check goes through: a rank that all ranks agree on whatever
/// op each of them called (a root would not do: ranks that disagree may name different ones).
/// It publishes its part, unless it is the quiet root of reduce or gather ([`Reads::quiet`]),
/// which waits for every part and so compares every peer's call itself.
pub(super) const HUB: Rank = 0;

/// What a rank checks, right after publishing and a fence, so that ranks that disagree on an
/// op never all finish it silently, and a rank that waits for a part that never comes is
/// woken by a peer that saw the disagreement. Every rank's fingerprint is compared, directly
/// or through agreeing ranks, with the hub's, which publishes unless it waits for every part
/// and no peer reads its own ([`Reads::quiet`]):
/// - a rank that waits for every part compares the hub's (or, being the hub, everyone's);
/// - a rank other than the hub that waits for no part (`Reads::Own`) looks at the hub's slot
///   ([`Looks::Hub`]), and the hub, unless it waits for every part, looks at every slot
///   ([`Looks::All`]): each stores its part, fences, then loads the other's, so at least one
///   of the two sees the other's part (which stays in its slot until every peer finished the
///   op);
/// - a non-root of broadcast or scatter (`Reads::Root(r)`) other than the hub whose root's
///   part is there when it starts compares that part alone and publishes nothing
///   ([`Reads::lazy`]): if they agree, the root really is a root of broadcast or scatter,
///   which is checked against the hub as above. One whose root's part is not there yet
///   publishes and looks at the hub like a rank that waits for no part (its root may never
///   publish: a rank that disagrees and found its own root's part), then waits.
///
/// Non-roots of reduce and gather so load one line another core writes, not `n - 1`, and
/// the usual non-root of broadcast and scatter stores none that its root must load; the hub
/// pays for everyone. `rule_tests` checks the rule against every order in which 3 and 4
/// ranks reach the op, over every combination of their calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Looks {
    /// Nothing beyond its waits.
    None,
    /// The hub's slot.
    Hub,
    /// Every peer's slot.
    All,
}

#[cfg(test)]
#[path = "rule_tests.rs"]
mod tests;
