//! `npurt._Replay`: the recorded launch lists of one model plan
//! (`npurt_kernels::replay`), and `_replay_begin` / `_replay_abort` around the run that
//! records one. Argument conversion only; the capture and the replay live in the crate.

use crate::args::cast_arg;
use crate::array::PyArray;
use crate::errors::{array_err, kernel_arg, IntoPy};
use crate::stream::stream_or_current;
use npurt_kernels::array::DeviceArray;
use npurt_kernels::replay::{self, Replay};
use pyo3::prelude::*;

fn arrays(objs: &[Bound<'_, PyAny>], what: &str) -> PyResult<Vec<DeviceArray>> {
    objs.iter()
        .map(|o| Ok(cast_arg::<PyArray>(o, what, "an npurt.DeviceArray")?.get().a.clone()))
        .collect()
}

/// The instances of one plan: each a launch list bound to its own arrays, used by one run
/// at a time.
#[pyclass(module = "npurt", name = "_Replay", frozen)]
pub(crate) struct PyReplay {
    r: Replay,
}

#[pymethods]
impl PyReplay {
    #[new]
    fn new() -> Self {
        PyReplay { r: Replay::new() }
    }

    /// Ends this thread's capture and adds it as an instance over `inputs` (None: an input
    /// no kernel reads) and `outputs`. Returns None, or why the capture cannot be replayed.
    fn add(
        &self,
        py: Python<'_>,
        inputs: Vec<Option<Bound<'_, PyAny>>>,
        outputs: Vec<Bound<'_, PyAny>>,
    ) -> PyResult<Option<String>> {
        let ins = inputs
            .iter()
            .map(|o| match o {
                None => Ok(None),
                Some(o) => Ok(Some(
                    cast_arg::<PyArray>(o, "input", "an npurt.DeviceArray")?.get().a.clone(),
                )),
            })
            .collect::<PyResult<Vec<_>>>();
        let (ins, outs) = match (ins, arrays(&outputs, "output")) {
            (Ok(i), Ok(o)) => (i, o),
            (Err(e), _) | (_, Err(e)) => {
                replay::abort();
                return Err(e);
            }
        };
        match py.detach(|| replay::end(ins, outs)).py_err()? {
            Ok(inst) => {
                self.r.add(inst);
                Ok(None)
            }
            Err(why) => Ok(Some(why)),
        }
    }

    /// How many instances were recorded.
    #[getter]
    fn instances(&self) -> usize {
        self.r.instances()
    }

    /// Queues one run on `stream`: `inputs` copied in, the kernels, the results copied into
    /// `outputs` (which `stream` then writes). False, with nothing queued, when every
    /// instance is busy.
    fn run(
        &self,
        py: Python<'_>,
        stream: &Bound<'_, PyAny>,
        inputs: Vec<Bound<'_, PyAny>>,
        outputs: Vec<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let s = stream_or_current(Some(stream))?;
        let (ins, outs) = (arrays(&inputs, "input")?, arrays(&outputs, "output")?);
        py.detach(|| self.r.run(&s, &ins, &outs)).map_err(array_err)
    }

    /// `run` into new output arrays, returned (None, with nothing queued, when every
    /// instance is busy): the allocation and the queueing in one call without the GIL.
    fn run_fresh(
        &self,
        py: Python<'_>,
        stream: &Bound<'_, PyAny>,
        inputs: Vec<Bound<'_, PyAny>>,
    ) -> PyResult<Option<Vec<PyArray>>> {
        let s = stream_or_current(Some(stream))?;
        let ins = arrays(&inputs, "input")?;
        let outs = py.detach(|| self.r.run_fresh(&s, &ins)).map_err(array_err)?;
        Ok(outs.map(|v| v.into_iter().map(|a| PyArray { a }).collect()))
    }
}

/// Starts capturing this thread's kernel launches on `stream` (for `_Replay.add`).
#[pyfunction]
pub(crate) fn _replay_begin(stream: &Bound<'_, PyAny>) -> PyResult<()> {
    replay::begin(&*stream_or_current(Some(stream))?).map_err(kernel_arg)
}

/// Drops this thread's capture (a recording run that failed).
#[pyfunction]
pub(crate) fn _replay_abort() {
    replay::abort()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyReplay>()?;
    m.add_function(wrap_pyfunction!(_replay_begin, m)?)?;
    m.add_function(wrap_pyfunction!(_replay_abort, m)?)
}
