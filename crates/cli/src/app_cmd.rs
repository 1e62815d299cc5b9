//! `iosets app`: applications doing plain POSIX I/O (being built; see issue 14).

use anyhow::{bail, Result};
use clap::Args;

/// `iosets app` flags.
#[derive(Debug, Args)]
pub(crate) struct AppArgs {}

/// `iosets app`.
pub(crate) fn run(_args: &AppArgs) -> Result<()> {
    bail!("iosets app: not built yet")
}
