//! A rank's stage: the ops its driver moves together. One op at a time, in issue order,
//! except that consecutive sends and receives form one stage and move together, as they do
//! in a [`Group`](crate::Group): torch's ring of `isend` to the next rank then `irecv` from
//! the previous one (`send_async`, `recv_async`) completes, where running the send alone
//! would wait for a receive queued behind it. A send or receive issued while such a stage
//! runs joins it; any other op waits until the stage is done.
//!
//! Within a stage, ops on one lane (sends to one peer, or receives from one peer) still run
//! one after the other: a peer matches a rank's messages to its calls in order, so a later
//! receive must not open the message an earlier one waits for.

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{Engine, Queued, lock};
use crate::device::Device;
use crate::error::CollectiveError;
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

fn lane<D: Device>(q: &Queued<D>) -> Option<(bool, Rank)> {
    q.op.run.ctx.fp.desc.lane()
}

/// Whether `next` may join a stage of sends and receives: it is one too, and shares no
/// memory with them that one of them writes.
fn joins<D: Device>(stage: &[Queued<D>], next: &Queued<D>) -> bool {
    next.op.run.ctx.p2p && !stage.iter().any(|q| crate::pins::clash(&q.ranges, &next.ranges))
}

/// Whether `stage[i]` waits for an earlier op of its lane in the stage.
fn held_back<D: Device>(stage: &[Queued<D>], i: usize) -> bool {
    let Some(l) = stage.get(i).and_then(lane) else { return false };
    stage[..i].iter().any(|q| lane(q) == Some(l))
}

impl<D: Device> Engine<D> {
    /// Takes the next ops off the queue into `stage`: the oldest op when the stage is empty,
    /// and then, while the stage holds only sends and receives, every send and receive queued
    /// right behind them — up to one that uses memory an op of the stage writes, or writes
    /// memory one reads (a receive into a tensor, then a send of it: it waits for the stage,
    /// as issue order says).
    pub(super) fn admit(&self, stage: &mut Vec<Queued<D>>) {
        while self.queued.load(Ordering::Acquire) > 0 {
            let next = if stage.is_empty() {
                self.pop_if(|_| true)
            } else if stage.iter().all(|q| q.op.run.ctx.p2p) {
                self.pop_if(|next| joins(stage, next))
            } else {
                return;
            };
            // None: the queue is empty, or its oldest op may not join.
            let Some(q) = next else { return };
            stage.push(q);
        }
    }

    /// Moves every op of the stage as far as it goes without blocking, oldest first, and
    /// finishes those that are done.
    pub(super) fn step(&self, stage: &mut Vec<Queued<D>>) -> Stepped {
        let (mut moved, mut deadline, mut slices) = (false, None::<Instant>, false);
        let mut i = 0;
        while i < stage.len() {
            if held_back(stage, i) {
                i += 1;
                continue;
            }
            let q = &mut stage[i];
            match q.traced(|q| q.op.run.take_turn(&mut q.turn)) {
                sched::Advance::Blocked => {
                    let d = q.op.run.deadline();
                    deadline = Some(deadline.map_or(d, |e| e.min(d)));
                    slices |= q.op.run.needs_slices(&q.turn);
                    i += 1;
                }
                sched::Advance::Done(r) => {
                    // Later ops of its lane may start now: the loop reaches them.
                    let q = stage.remove(i);
                    self.finish(q, r);
                    moved = true;
                }
            }
        }
        match deadline {
            _ if moved => Stepped::Moved,
            Some(deadline) => Stepped::Blocked { deadline, slices },
            None => Stepped::Idle,
        }
    }

    /// Whether stepping the stage again may move it: one of its ops that may run is ready,
    /// or an op waits in the queue that [`admit`](Self::admit) would take (cheap).
    pub(super) fn stage_ready(&self, stage: &[Queued<D>]) -> bool {
        let ready = (0..stage.len()).any(|i| !held_back(stage, i) && stage[i].op.run.is_ready(&stage[i].turn));
        ready || (self.queued.load(Ordering::Acquire) > 0 && self.joinable(stage))
    }

    /// Whether the queue's oldest op may join `stage`.
    fn joinable(&self, stage: &[Queued<D>]) -> bool {
        if stage.is_empty() {
            return true;
        }
        stage.iter().all(|q| q.op.run.ctx.p2p) && lock(&self.queue).front().is_some_and(|q| joins(stage, q))
    }

    /// The long-wait checks of the stage's waiting ops; finishes those the checks ended and
    /// says whether any did.
    pub(super) fn check_stage(&self, stage: &mut Vec<Queued<D>>) -> bool {
        let mut ended = false;
        let mut i = 0;
        while i < stage.len() {
            let q = &mut stage[i];
            match q.traced(|q| q.op.run.check_waiting(&mut q.turn)) {
                Some(e) => {
                    let q = stage.remove(i);
                    self.finish(q, Err(e));
                    ended = true;
                }
                None => i += 1,
            }
        }
        ended
    }

    /// Blocks the driving thread until the stage may move, a new op may join it, or the
    /// earliest deadline passes (the next step sees it).
    pub(super) fn wait(&self, stage: &mut Vec<Queued<D>>, deadline: Instant, slices: bool) {
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
