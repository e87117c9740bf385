//! The preparation every booting verb starts with, once: the host provisioned for what the
//! verb needs, the VM flags resolved into the boots' options (a bad `--share` fails before
//! anything builds), then the kernels built or fetched.

use anyhow::Result;

use crate::cli::{KernelArgs, VmArgs};
use crate::kernel::build::Built;
use crate::run::boot::Options;
use crate::setup::provision::{ensure, Needs};

/// What a booting verb works with.
pub struct Prepared {
    pub built: Vec<Built>,
    pub opts: Options,
}

/// Provisions `needs`, resolves `vm` and builds (or fetches) `kernel`'s kernels, in that order.
pub fn prepare(needs: &Needs, kernel: &KernelArgs, vm: &VmArgs) -> Result<Prepared> {
    ensure(needs)?;
    let opts = Options::of(vm, kernel.cache_dir.as_deref())?;
    let built = crate::kernel::build_all(&kernel.request()?)?;
    Ok(Prepared { built, opts })
}
