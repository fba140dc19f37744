//! Which cores the threads snapgraph starts run on.
//!
//! The store's encoder and the CLI start threads for work beside their own (a
//! batch's second half encoded, the store opened while the index is read, stats
//! taken ahead of a walk). The kernel places a new thread on its
//! creator's core and may leave it queued there behind the creator for milliseconds
//! (measured on a 2-core guest: the whole of a turn) while the other core idles.
//! [`Beside`] is the remedy, in three steps: the creator notes its core before it
//! spawns ([`Beside::here`]), the new thread moves itself off that core first thing
//! ([`Beside::leave`]), and the creator yields once so that the new thread runs those
//! lines ([`Beside::yield_to`]).
//!
//! Every thread started beside a thread's own work goes through it: the encoder's
//! second thread ([`crate::codec`]) and, in the CLI, the store's opener, the stat
//! helper, the hashers of files whose stat changed, a first commit's second reader,
//! a batched commit's writer and a checkout's writers (where the starting thread
//! writes too). The hashers were the last to get it: on a release `rsync`ed over the
//! tree, the one hasher of a 2-core machine was found sharing the walking thread's
//! core for 8 ms and more at a time while the other core idled (`perf sched
//! timehist`), and a release's commit took 34.4 ms instead of 30.4.

use std::sync::OnceLock;

/// How many cores this process may run on (its affinity mask; one system call,
/// asked once per process). A helper on a single core would only take turns with
/// its creator.
pub fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        let n = rustix::thread::sched_getaffinity(None).map_or(1, |set| set.count() as usize);
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        n
    })
}

/// Moves the calling thread off the core `cpu` (its creator's), when it may run
/// elsewhere: a thread that moves itself runs at once (see the module docs). Best
/// effort: on failure the thread stays where it is.
pub fn leave_cpu(cpu: usize) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Ok(mut set) = rustix::thread::sched_getaffinity(None) {
        if set.is_set(cpu) && set.count() > 1 {
            set.unset(cpu);
            let _ = rustix::thread::sched_setaffinity(None, &set);
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = cpu;
}

/// The core the calling thread last ran on, from `/proc/thread-self/stat` (field
/// 39; one open, read and close, about 10 us), or `None` where that file cannot be
/// read or parsed. Not `getcpu` through rustix: its vDSO lookup crashes under
/// valgrind (rustix issue 1559), where the benches run the CLI.
pub fn current_cpu() -> Option<usize> {
    use std::io::Read;
    // One read (the file says it is empty, so `fs::read` would read it in growing
    // pieces, each of which the kernel formats whole): its 52 fields fit in 1 KiB.
    let mut buf = [0u8; 1024];
    let len = std::fs::File::open("/proc/thread-self/stat")
        .ok()?
        .read(&mut buf)
        .ok()?;
    let stat = &buf[..len];
    // The name (field 2) is in parentheses and may hold anything: the fields are
    // counted after its closing one, from field 3.
    let after = stat.iter().rposition(|&b| b == b')')?;
    let field = stat[after + 1..]
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
        .nth(39 - 3)?;
    std::str::from_utf8(field).ok()?.parse().ok()
}

/// The core a thread about to be started should leave to its creator: see the
/// module docs. `None` inside when there is nothing to leave (one core, or the core
/// could not be read); each step is then a no-op.
#[derive(Debug, Clone, Copy)]
pub struct Beside(Option<usize>);

impl Beside {
    /// The calling thread's core, when this process may run on more than one.
    pub fn here() -> Self {
        Beside((cores() > 1).then(current_cpu).flatten())
    }

    /// In the new thread, first: move off the creator's core ([`leave_cpu`]).
    pub fn leave(self) {
        if let Some(cpu) = self.0 {
            leave_cpu(cpu);
        }
    }

    /// In the creator, right after the spawn: let the new thread, which may be
    /// queued on this core, run the lines that move it to another one.
    pub fn yield_to(self) {
        if self.0.is_some() {
            std::thread::yield_now();
        }
    }
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use super::*;

    #[test]
    fn the_current_cpu_is_one_this_thread_may_run_on() {
        // `/proc` is mounted wherever these tests run (Linux CI).
        let cpu = current_cpu().expect("/proc/thread-self/stat");
        let set = rustix::thread::sched_getaffinity(None).unwrap();
        assert!(set.is_set(cpu), "cpu {cpu}");
    }

    /// A thread started beside its creator may no longer run on the creator's core
    /// (where there is another to run on); the creator's own affinity is untouched.
    #[test]
    fn a_thread_started_beside_leaves_its_creators_core() {
        let before = rustix::thread::sched_getaffinity(None).unwrap();
        let beside = Beside::here();
        let theirs = std::thread::spawn(move || {
            beside.leave();
            rustix::thread::sched_getaffinity(None).unwrap()
        });
        beside.yield_to();
        let theirs = theirs.join().unwrap();
        match beside.0 {
            Some(cpu) => {
                assert!(!theirs.is_set(cpu), "still on cpu {cpu}");
                assert_eq!(theirs.count() + 1, before.count());
            }
            None => assert_eq!(cores(), 1, "a core to leave on {} cores", cores()),
        }
        assert_eq!(rustix::thread::sched_getaffinity(None).unwrap(), before);
    }
}
