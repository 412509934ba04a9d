//! The threads that decode list pages and bursts of watch events, and free the objects informers
//! are done with (see [`retired_objects`](crate::retired_objects)): one per core, started on
//! first use and kept for the life of the process, shared by every informer.
//!
//! tokio's blocking pool starts a thread whenever all of its threads are busy, so a watch that
//! hands it eight batches at once ran on dozens of threads in a few seconds. Under glibc's malloc
//! each new thread takes a heap of its own (up to eight per core) that starts empty and grows a
//! page at a time, while the objects it decoded are freed later into the heaps of threads long
//! gone. A fixed set of threads keeps decoding on as many heaps as there are cores, and those
//! heaps get back the memory of the objects they decoded when the store replaces them.

use std::collections::VecDeque;
use std::future::Future;
use std::num::NonZeroUsize;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use parking_lot::{Condvar, Mutex};
use tokio::sync::oneshot;

/// A decoding job that ended without a result: the code it ran panicked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DecodePoolError {
    /// The job panicked (a `Deserialize` implementation, most likely); the panic was reported by
    /// the panic hook and the thread went on with the next job.
    #[error("the decoding job panicked")]
    Panicked,
}

type Job = Box<dyn FnOnce() + Send>;

/// The jobs waiting for a thread, and the condition the idle threads wait on.
struct Pool {
    jobs: Mutex<VecDeque<Job>>,
    ready: Condvar,
}

impl Pool {
    fn push(&self, job: Job) {
        self.jobs.lock().push_back(job);
        self.ready.notify_one();
    }

    /// Runs jobs, one after another, forever.
    fn work(&self) {
        loop {
            let job = {
                let mut jobs = self.jobs.lock();
                loop {
                    if let Some(job) = jobs.pop_front() {
                        break job;
                    }
                    self.ready.wait(&mut jobs);
                }
            };
            job();
        }
    }
}

/// How many threads decode: one per core.
pub(crate) fn threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, NonZeroUsize::get))
}

/// The pool, its threads started; `None` if not one thread could be started.
fn pool() -> Option<&'static Pool> {
    static POOL: OnceLock<Option<&'static Pool>> = OnceLock::new();
    *POOL.get_or_init(|| {
        let pool: &'static Pool = Box::leak(Box::new(Pool {
            jobs: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
        }));
        let started = (0..threads())
            .filter(|n| {
                std::thread::Builder::new()
                    .name(format!("ctrlkit-decode-{n}"))
                    .spawn(|| pool.work())
                    .is_ok()
            })
            .count();
        if started == 0 {
            tracing::warn!("no decoding thread could be started; decoding on the caller's thread");
            return None;
        }
        Some(pool)
    })
}

/// Runs `job` on a decoding thread; the returned handle resolves to its result.
///
/// If no decoding thread could be started, `job` runs at once on the calling thread.
pub(crate) fn spawn<R, F>(job: F) -> DecodeHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let (sender, receiver) = oneshot::channel();
    let run = move || {
        // A panic drops `sender`, which the handle reports; the thread lives on.
        if let Ok(result) = catch_unwind(AssertUnwindSafe(job)) {
            let _ = sender.send(result);
        }
    };
    match pool() {
        Some(pool) => pool.push(Box::new(run)),
        None => run(),
    }
    DecodeHandle(receiver)
}

/// The result of a job given to [`spawn`], once it has run.
///
/// Dropping the handle does not stop the job; its result is dropped when it ends.
pub(crate) struct DecodeHandle<R>(oneshot::Receiver<R>);

impl<R> Future for DecodeHandle<R> {
    type Output = Result<R, DecodePoolError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|result| result.map_err(|_| DecodePoolError::Panicked))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn jobs_run_and_hand_back_their_results() {
        let handles: Vec<_> = (0..100u64).map(|n| spawn(move || n * n)).collect();
        let mut results = Vec::new();
        for handle in handles {
            results.push(handle.await);
        }
        assert_eq!(results, (0..100u64).map(|n| Ok(n * n)).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn a_panicking_job_is_reported_and_the_threads_go_on() {
        let panics: Vec<_> = (0..threads() * 2)
            .map(|_| spawn(|| -> u8 { panic!("a Deserialize impl that panics") }))
            .collect();
        for handle in panics {
            assert_eq!(handle.await, Err(DecodePoolError::Panicked));
        }
        // The threads that ran the panicking jobs still take jobs.
        let after: Vec<_> = (0..threads() * 4).map(|n| spawn(move || n)).collect();
        for (n, handle) in after.into_iter().enumerate() {
            assert_eq!(handle.await, Ok(n));
        }
    }

    #[tokio::test]
    async fn one_named_thread_per_core_runs_jobs_at_once() {
        let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        assert_eq!(threads(), cores);
        // Each job waits until all of them run: with fewer threads than cores this never ends.
        let all_running = std::sync::Arc::new(std::sync::Barrier::new(cores));
        let jobs: Vec<_> = (0..cores)
            .map(|_| {
                let all_running = std::sync::Arc::clone(&all_running);
                spawn(move || {
                    all_running.wait();
                    std::thread::current().name().map(str::to_owned)
                })
            })
            .collect();
        let mut names = Vec::new();
        for job in jobs {
            names.push(job.await.unwrap().unwrap());
        }
        names.sort();
        names.dedup();
        assert_eq!(names.len(), cores, "{names:?}");
        assert!(names.iter().all(|name| name.starts_with("ctrlkit-decode-")));
    }
}
