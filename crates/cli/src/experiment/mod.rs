//! `iosets experiment`: seeds' experiments end to end (being built; see issue 14).

use anyhow::{bail, Result};
use clap::Args;

/// `iosets experiment` flags.
#[derive(Debug, Args)]
pub(crate) struct ExperimentArgs {}

/// `iosets experiment`.
pub(crate) fn run(_args: &ExperimentArgs) -> Result<()> {
    bail!("iosets experiment: not built yet")
}
