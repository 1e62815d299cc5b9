//! I/O period detection (issue 4): being written.
#![deny(missing_docs)]
