//! Promise-returning calls: the work runs on the libuv thread pool as a napi async
//! task, off the event loop; its value or coded error settles the promise.

use napi::bindgen_prelude::{AsyncTask, JsError, ToNapiValue, TypeName, Unknown};
use napi::{Env, ScopedTask, Task};

use crate::error::{error, Result};

type Work<T> = Box<dyn FnOnce() -> Result<T> + Send>;
type After = Box<dyn FnOnce() + Send>;

/// One piece of work for the thread pool.
pub struct Job<T> {
    work: Option<Work<T>>,
    after: Option<After>,
}

/// A promise of what `work` returns.
pub fn spawn<T, F>(work: F) -> AsyncTask<Job<T>>
where
    T: Send + ToNapiValue + TypeName + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    AsyncTask::new(Job {
        work: Some(Box::new(work)),
        after: None,
    })
}

/// [`spawn`], then `after` on the JavaScript thread once the promise is settled
/// (before any JavaScript sees the result).
pub fn spawn_then<T, F, A>(work: F, after: A) -> AsyncTask<Job<T>>
where
    T: Send + ToNapiValue + TypeName + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
    A: FnOnce() + Send + 'static,
{
    AsyncTask::new(Job {
        work: Some(Box::new(work)),
        after: Some(Box::new(after)),
    })
}

impl<T> Task for Job<T>
where
    T: Send + ToNapiValue + TypeName + 'static,
{
    type Output = Result<T>;
    type JsValue = T;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        Ok(match self.work.take() {
            Some(work) => work(),
            None => Err(error("OTHER", "async task ran twice")),
        })
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> napi::Result<T> {
        // A coded error is built as a JavaScript Error here, on the JavaScript
        // thread, and rejected as that very object, so its `code` survives.
        output.map_err(|e| napi::Error::from(JsError::from(e).into_unknown(env)))
    }

    fn finally(self, _env: Env) -> napi::Result<()> {
        if let Some(after) = self.after {
            after();
        }
        Ok(())
    }
}

/// How a [`Built`] job's value becomes JavaScript: built through `Env` on the
/// JavaScript thread (for results shaped by hand, like a commit's object record).
pub type Build<T> = for<'env> fn(&'env Env, T) -> Result<Unknown<'env>>;

/// A [`Job`] whose value is built into a JavaScript object by a [`Build`] function
/// when the promise settles, instead of through `ToNapiValue`.
pub struct Built<T> {
    job: Job<T>,
    build: Build<T>,
}

/// [`spawn_then`] with the value built by `build`.
pub fn spawn_built<T, F, A>(work: F, after: A, build: Build<T>) -> AsyncTask<Built<T>>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
    A: FnOnce() + Send + 'static,
{
    AsyncTask::new(Built {
        job: Job {
            work: Some(Box::new(work)),
            after: Some(Box::new(after)),
        },
        build,
    })
}

impl<'env, T: Send + 'static> ScopedTask<'env> for Built<T> {
    type Output = Result<T>;
    type JsValue = Unknown<'env>;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        Ok(match self.job.work.take() {
            Some(work) => work(),
            None => Err(error("OTHER", "async task ran twice")),
        })
    }

    fn resolve(&mut self, env: &'env Env, output: Self::Output) -> napi::Result<Unknown<'env>> {
        // As in `Job::resolve`: a coded error is rejected as the very `Error` object.
        let coded = |e| napi::Error::from(JsError::from(e).into_unknown(*env));
        let value = output.map_err(coded)?;
        (self.build)(env, value).map_err(coded)
    }

    fn finally(self, _env: Env) -> napi::Result<()> {
        if let Some(after) = self.job.after {
            after();
        }
        Ok(())
    }
}
