//! placeholder until written
#![deny(missing_docs)]
