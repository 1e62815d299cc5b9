//! Online detection (being written).
