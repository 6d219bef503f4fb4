//! The parent side: children started from this test binary, each with a role and a
//! transport, waited for under one deadline and killed (with their logs removed) when dropped.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ruccl::UniqueId;

use super::{GROUP_DEADLINE, ROLE};

/// How the children's processes talk to each other.
#[derive(Clone, Copy, Debug)]
pub(super) enum Transport {
    /// Shared memory, small ops as messages too (`RUCCL_SHM_SLOTS=0`).
    Shm,
    /// Shared memory with ring copies only (`RUCCL_SHM_CMA=0`: no single-copy reads).
    ShmCopy,
    /// TCP (`RUCCL_SHM_DISABLE=1`).
    Tcp,
    /// Shared memory, and small ops exchanged through the host's slots (the default between
    /// processes of one host).
    Slots,
}

/// Children, killed (and reaped) when dropped.
pub(super) struct Kids {
    kids: Vec<(String, Child, PathBuf)>,
    transport: Transport,
}

impl Drop for Kids {
    fn drop(&mut self) {
        for (_, c, log) in &mut self.kids {
            let _ = c.kill();
            let _ = c.wait();
            let _ = std::fs::remove_file(&*log);
        }
    }
}

fn scratch(name: &str) -> PathBuf {
    let nonce: u64 = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    std::env::temp_dir().join(format!("ruccl-mp-{}-{name}-{nonce}", std::process::id()))
}

impl Kids {
    pub(super) fn new(transport: Transport) -> Self {
        Kids { kids: Vec::new(), transport }
    }

    /// Starts this binary as a child with `role` and `env`.
    pub(super) fn spawn(&mut self, name: &str, role: &str, env: &[(&str, String)]) {
        let log = scratch(name);
        let out = File::create(&log).unwrap();
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["child", "--exact", "--nocapture", "--test-threads=1"])
            .env(ROLE, role)
            .env("RUCCL_TIMEOUT", "20")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        // Slots are on by default: every transport but `Slots` turns them off.
        cmd.env("MP_SLOTS", "0").env("RUCCL_SHM_SLOTS", "0");
        match self.transport {
            Transport::Shm => cmd.env("MP_SHM", "1").env_remove("RUCCL_SHM_DISABLE"),
            Transport::ShmCopy => cmd.env("MP_SHM", "1").env_remove("RUCCL_SHM_DISABLE").env("RUCCL_SHM_CMA", "0"),
            Transport::Tcp => cmd.env("MP_SHM", "0").env("RUCCL_SHM_DISABLE", "1"),
            Transport::Slots => cmd
                .env("MP_SHM", "1")
                .env_remove("RUCCL_SHM_DISABLE")
                .env_remove("RUCCL_SHM_SLOTS")
                .env("MP_SLOTS", "1"),
        };
        for (k, v) in env {
            cmd.env(k, v);
        }
        self.kids.push((name.to_string(), cmd.spawn().unwrap(), log));
    }

    /// Stops `name` (`SIGSTOP`): it stays alive, its connections open, and sends nothing.
    pub(super) fn stop(&mut self, name: &str) {
        let (_, c, _) = self.kids.iter_mut().find(|(n, ..)| n == name).unwrap();
        let ok = Command::new("kill").args(["-STOP", &c.id().to_string()]).status().unwrap();
        assert!(ok.success(), "kill -STOP failed");
    }

    /// Continues `name` after a [`stop`](Self::stop) (`SIGCONT`).
    pub(super) fn cont(&mut self, name: &str) {
        let (_, c, _) = self.kids.iter_mut().find(|(n, ..)| n == name).unwrap();
        let ok = Command::new("kill").args(["-CONT", &c.id().to_string()]).status().unwrap();
        assert!(ok.success(), "kill -CONT failed");
    }

    pub(super) fn kill(&mut self, name: &str) {
        let (_, c, _) = self.kids.iter_mut().find(|(n, ..)| n == name).unwrap();
        c.kill().unwrap();
        // Reaped: its sockets are closed once this returns, as a test that kills expects.
        let _ = c.wait();
    }

    /// Waits for every child; panics with their logs if one fails or the deadline passes
    /// (the children are then killed by `Drop`). `skip` names children not checked.
    pub(super) fn wait(&mut self, skip: &[&str]) {
        let all: Vec<String> =
            self.kids.iter().map(|(n, ..)| n.clone()).filter(|n| !skip.contains(&n.as_str())).collect();
        self.wait_for(&all.iter().map(String::as_str).collect::<Vec<_>>());
    }

    /// Waits for the children named in `names` only, and checks them (the others are killed
    /// by `Drop`).
    pub(super) fn wait_for(&mut self, names: &[&str]) {
        let deadline = Instant::now() + GROUP_DEADLINE;
        let mut failed = Vec::new();
        for (name, c, log) in &mut self.kids {
            if !names.contains(&name.as_str()) {
                continue;
            }
            let status = loop {
                match c.try_wait().unwrap() {
                    Some(s) => break Some(s),
                    None if Instant::now() > deadline => break None,
                    None => std::thread::sleep(Duration::from_millis(20)),
                }
            };
            let text = std::fs::read_to_string(&*log).unwrap_or_default();
            let _ = std::fs::remove_file(&*log);
            if std::env::var_os("MP_SHOW").is_some() {
                println!("--- {name}: {status:?}\n{text}");
            }
            match status {
                Some(s) if s.success() && text.contains("child ok") => {}
                s => failed.push(format!("--- {name}: {s:?}\n{text}")),
            }
        }
        assert!(failed.is_empty(), "children failed:\n{}", failed.join("\n"));
    }
}

/// A file a child creates (`MP_MARK`) to tell the parent it got somewhere; removed on drop.
pub(super) struct Mark(PathBuf);

impl Mark {
    pub(super) fn new(name: &str) -> Self {
        Mark(scratch(name))
    }

    /// The variable that tells a child where to create it.
    pub(super) fn env(&self) -> (&'static str, String) {
        ("MP_MARK", self.0.display().to_string())
    }

    /// Waits until a child has created it; panics saying `never` after `within`.
    pub(super) fn wait(&self, within: Duration, never: &str) {
        let deadline = Instant::now() + within;
        while !self.0.exists() {
            assert!(Instant::now() < deadline, "{never}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Mark {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

pub(super) fn ranks_env(id: &UniqueId, world: usize, ranks: &[usize]) -> Vec<(&'static str, String)> {
    let list: Vec<String> = ranks.iter().map(|r| r.to_string()).collect();
    vec![("MP_ID", id.to_string()), ("MP_WORLD", world.to_string()), ("MP_RANKS", list.join(","))]
}
