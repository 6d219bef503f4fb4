//! Rank threads for the benches: one thread per rank, each sets up its op once and then runs
//! it `iters` times on request, reporting its elapsed time; the slowest rank's time counts.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// `n` rank threads repeating one op each.
pub struct RankThreads {
    tx: Vec<Sender<u64>>,
    rx: Receiver<Duration>,
    handles: Vec<JoinHandle<()>>,
}

impl RankThreads {
    /// `setup(rank)` runs on the rank's thread and returns the op to repeat.
    pub fn new<F, Op>(n: usize, setup: F) -> RankThreads
    where
        F: Fn(usize) -> Op + Send + Clone + 'static,
        Op: FnMut(),
    {
        let (done_tx, rx) = channel();
        let mut tx = Vec::new();
        let mut handles = Vec::new();
        for rank in 0..n {
            let (t, r) = channel::<u64>();
            tx.push(t);
            let (setup, done) = (setup.clone(), done_tx.clone());
            handles.push(std::thread::spawn(move || {
                let mut op = setup(rank);
                while let Ok(iters) = r.recv() {
                    let t = Instant::now();
                    (0..iters).for_each(|_| op());
                    done.send(t.elapsed()).expect("report");
                }
            }));
        }
        RankThreads { tx, rx, handles }
    }

    /// Runs `iters` ops on every rank; the slowest rank's time counts.
    pub fn run(&self, iters: u64) -> Duration {
        self.tx.iter().for_each(|t| t.send(iters).expect("start"));
        (0..self.tx.len()).map(|_| self.rx.recv().expect("done")).max().unwrap_or_default()
    }
}

impl Drop for RankThreads {
    fn drop(&mut self) {
        self.tx.clear();
        self.handles.drain(..).for_each(|h| h.join().expect("rank thread"));
    }
}
