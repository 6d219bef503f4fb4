//! A rank's stage: the ops its driver moves together. One op at a time, in issue order,
//! except that consecutive sends and receives form one stage and move together, as they do
//! in a [`Group`](crate::Group): torch's ring of `isend` to the next rank then `irecv` from
//! the previous one (`send_async`, `recv_async`) completes, where running the send alone
//! would wait for a receive queued behind it. A send or receive issued while such a stage
//! runs joins it, unless it uses memory one of the stage's ops writes (or writes memory one
//! reads): then it waits for the stage, as issue order says. Any other op waits until the
//! stage is done.
//!
//! Within a stage, ops on one lane (sends to one peer, or receives from one peer) still run
//! one after the other: a peer matches a rank's messages to its calls in order, so a later
//! receive must not open the message an earlier one waits for: each lane is a queue of its
//! own, on which an op starts once the one before it has sent or opened its message.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{Engine, Queued, lock};
use crate::device::Device;
use crate::error::{CollectiveError, Result};
use crate::pins::Mem;
use crate::sched;
use crate::types::Rank;

/// How long a driver waiting on device work that rings no doorbell sleeps between looks.
const DEVICE_SLICE: Duration = Duration::from_micros(200);

/// Where [`Engine::step`] left a stage.
pub(super) enum Stepped {
    /// Nothing runs and nothing is queued that may start.
    Idle,
    /// An op finished: admit and step again.
    Moved,
    /// Every op that may move waits; the earliest deadline among them, and whether one waits
    /// on device work that rings no doorbell.
    Blocked { deadline: Instant, slices: bool },
}

/// A send's or receive's lane: (whether it sends, the peer).
type Lane = (bool, Rank);

/// The ops a rank's driver moves together (see the module's docs).
pub(crate) struct Stage<D: Device> {
    /// An op that is not a send or receive: alone in its stage.
    solo: Option<Queued<D>>,
    /// The sends and receives, a queue per lane (whether it sends, the peer), in issue order.
    lanes: Vec<(Lane, VecDeque<Queued<D>>)>,
    /// How many of the stage's sends and receives use each memory: one that uses none of
    /// them clashes with none (the usual case) without a look at each.
    mems: HashMap<Mem, usize>,
}

impl<D: Device> Default for Stage<D> {
    fn default() -> Self {
        Stage { solo: None, lanes: Vec::new(), mems: HashMap::new() }
    }
}

impl<D: Device> Stage<D> {
    /// Whether no op is in the stage.
    pub(super) fn is_empty(&self) -> bool {
        self.solo.is_none() && self.lanes.is_empty()
    }

    /// Whether the stage holds sends and receives only (or nothing).
    fn p2p(&self) -> bool {
        self.solo.is_none()
    }

    /// The ops that may move now: the solo op, and on each lane the oldest ops up to the
    /// first that has not sent or opened its message.
    fn movable(&self) -> impl Iterator<Item = &Queued<D>> {
        let lanes = self.lanes.iter().flat_map(|(_, ops)| {
            let waiting = ops.iter().position(|q| !q.op.run.moved_message()).map_or(ops.len(), |k| k + 1);
            ops.iter().take(waiting)
        });
        self.solo.iter().chain(lanes)
    }

    /// The lone op that is not a send or receive, taken out to be driven on its own.
    pub(super) fn take_solo(&mut self) -> Option<Queued<D>> {
        self.solo.take()
    }

    fn push(&mut self, q: Queued<D>) {
        let Some(lane) = q.op.run.ctx.fp.desc.lane() else {
            self.solo = Some(q);
            return;
        };
        for r in &q.ranges {
            *self.mems.entry(r.mem).or_insert(0) += 1;
        }
        match self.lanes.iter_mut().find(|(l, _)| *l == lane) {
            Some((_, ops)) => ops.push_back(q),
            None => self.lanes.push((lane, VecDeque::from([q]))),
        }
    }

    /// Forgets a send's or receive's memory once it left the stage.
    fn forget(&mut self, q: &Queued<D>) {
        for r in &q.ranges {
            if let Some(n) = self.mems.get_mut(&r.mem) {
                *n -= 1;
                if *n == 0 {
                    self.mems.remove(&r.mem);
                }
            }
        }
    }

    /// Whether `next` may join the stage: it is a send or receive, the stage holds only
    /// those, and it shares no memory with them that one of the two writes.
    fn joins(&self, next: &Queued<D>) -> bool {
        if !(self.p2p() && next.op.run.ctx.p2p) {
            return false;
        }
        if !next.ranges.iter().any(|r| self.mems.contains_key(&r.mem)) {
            return true;
        }
        !self.lanes.iter().flat_map(|(_, ops)| ops).any(|q| crate::pins::clash(&q.ranges, &next.ranges))
    }
}

impl<D: Device> Engine<D> {
    /// Takes the next ops off the queue into `stage`: the oldest op when the stage is empty,
    /// and then, while the stage holds only sends and receives, every send and receive queued
    /// right behind them that [`Stage::joins`] it.
    pub(super) fn admit(&self, stage: &mut Stage<D>) {
        while self.queued.load(Ordering::Acquire) > 0 {
            let next = if stage.is_empty() {
                self.pop_if(|_| true)
            } else if stage.p2p() {
                self.pop_if(|next| stage.joins(next))
            } else {
                return;
            };
            // None: the queue is empty, or its oldest op may not join.
            let Some(q) = next else { return };
            stage.push(q);
        }
    }

    /// Moves every op of the stage that may move as far as it goes without blocking, and
    /// finishes those that are done.
    pub(super) fn step(&self, stage: &mut Stage<D>) -> Stepped {
        let (mut moved, mut deadline, mut slices) = (false, None::<Instant>, false);
        let mut wait = |q: &Queued<D>| {
            let d = q.op.run.deadline();
            deadline = Some(deadline.map_or(d, |e: Instant| e.min(d)));
            slices |= q.op.run.needs_slices(&q.turn);
        };
        if let Some(q) = stage.solo.as_mut() {
            match q.traced(|q| q.op.run.take_turn(&mut q.turn)) {
                sched::Advance::Blocked => wait(q),
                sched::Advance::Done(r) => {
                    if let Some(q) = stage.solo.take() {
                        self.finish(q, r);
                    }
                    moved = true;
                }
            }
        }
        let mut done = Vec::new();
        for (_, ops) in stage.lanes.iter_mut() {
            // Oldest first; each may start once the one before it has sent or opened its
            // message (or is done).
            let mut k = 0;
            while let Some(q) = ops.get_mut(k) {
                match q.traced(|q| q.op.run.take_turn(&mut q.turn)) {
                    sched::Advance::Blocked => {
                        wait(q);
                        if !q.op.run.moved_message() {
                            break;
                        }
                        k += 1;
                    }
                    sched::Advance::Done(r) => {
                        if let Some(q) = ops.remove(k) {
                            done.push((q, r));
                        }
                    }
                }
            }
        }
        moved |= !done.is_empty();
        for (q, r) in done {
            stage.forget(&q);
            self.finish(q, r);
        }
        stage.lanes.retain(|(_, ops)| !ops.is_empty());
        match deadline {
            _ if moved => Stepped::Moved,
            Some(deadline) => Stepped::Blocked { deadline, slices },
            None => Stepped::Idle,
        }
    }

    /// Whether stepping the stage again may move it: an op that may move is ready, or an op
    /// waits in the queue that [`admit`](Self::admit) would take (cheap).
    pub(super) fn stage_ready(&self, stage: &Stage<D>) -> bool {
        stage.movable().any(|q| q.op.run.is_ready(&q.turn))
            || (self.queued.load(Ordering::Acquire) > 0
                && (stage.is_empty() || (stage.p2p() && lock(&self.queue).front().is_some_and(|q| stage.joins(q)))))
    }

    /// The long-wait checks of the stage's waiting ops; finishes those the checks ended and
    /// says whether any did.
    pub(super) fn check_stage(&self, stage: &mut Stage<D>) -> bool {
        let mut ended: Vec<(Queued<D>, Result<()>)> = Vec::new();
        if let Some(q) = stage.solo.as_mut()
            && let Some(e) = q.traced(|q| q.op.run.check_waiting(&mut q.turn))
            && let Some(q) = stage.solo.take()
        {
            ended.push((q, Err(e)));
        }
        for (_, ops) in stage.lanes.iter_mut() {
            // Ops that have not started have no wait to check.
            let mut k = 0;
            while let Some(q) = ops.get_mut(k) {
                match q.traced(|q| q.op.run.check_waiting(&mut q.turn)) {
                    Some(e) => ended.extend(ops.remove(k).map(|q| (q, Err(e)))),
                    None => k += 1,
                }
            }
        }
        stage.lanes.retain(|(_, ops)| !ops.is_empty());
        let any = !ended.is_empty();
        for (q, r) in ended {
            stage.forget(&q);
            self.finish(q, r);
        }
        any
    }

    /// Blocks the driving thread until the stage may move, a new op may join it, or the
    /// earliest deadline passes (the next step sees it).
    pub(super) fn wait(&self, stage: &mut Stage<D>, deadline: Instant, slices: bool) {
        let now = Instant::now();
        let wake = if slices { deadline.min(now + DEVICE_SLICE) } else { deadline };
        let stage = RefCell::new(stage);
        let mut ready = || self.stage_ready(&stage.borrow());
        let mut slow = || {
            if self.check_stage(&mut stage.borrow_mut()) {
                // An op ended: the driver looks at the stage again.
                Err(CollectiveError::protocol("an op ended during the wait"))
            } else {
                Ok(())
            }
        };
        let _ = crate::transport::wait_any(wake, &mut ready, &|| None, &mut slow);
    }
}
