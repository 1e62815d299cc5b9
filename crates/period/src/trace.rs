//! Trace formats (being written).

/// A trace format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// iosets CSV.
    Csv,
}

impl Format {
    /// Names.
    pub const NAMES: &'static [&'static str] = &["csv"];
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("csv")
    }
}
