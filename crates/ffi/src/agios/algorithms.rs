//! AGIOS's algorithm identifiers and names (`scheduling_algorithms.h`) and the global
//! `config_agios_default_algorithm`, so that code written for AGIOS (its own `test/agios_test.c`
//! names its output file with `get_algorithm_name_from_index(config_agios_default_algorithm)`)
//! builds and links against the shim unchanged.
//!
//! The identifiers are AGIOS's (`MLF_SCHEDULER` 0 … `WFQ_SCHEDULER` 8, same values and names as
//! upstream). An iosets policy chosen by its own name (`iosets`, `deadline`, …) has the identifier
//! [`IOSETS_POLICY_BASE`] + its position in iosets' policy registry, an extension: AGIOS never
//! hands out an identifier ≥ [`IO_SCHEDULER_COUNT`], and those positions may change between
//! versions of iosets (look names up, do not store numbers).

use std::ffi::{c_char, CStr, CString};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::OnceLock;

use crate::guard::guard;

/// `MLF_SCHEDULER` of AGIOS.
pub const MLF_SCHEDULER: i32 = 0;
/// `TOAGG_SCHEDULER` of AGIOS.
pub const TOAGG_SCHEDULER: i32 = 1;
/// `SJF_SCHEDULER` of AGIOS (its default algorithm).
pub const SJF_SCHEDULER: i32 = 2;
/// `AIOLI_SCHEDULER` of AGIOS.
pub const AIOLI_SCHEDULER: i32 = 3;
/// `TO_SCHEDULER` of AGIOS.
pub const TO_SCHEDULER: i32 = 4;
/// `SW_SCHEDULER` of AGIOS.
pub const SW_SCHEDULER: i32 = 5;
/// `NOOP_SCHEDULER` of AGIOS.
pub const NOOP_SCHEDULER: i32 = 6;
/// `TWINS_SCHEDULER` of AGIOS.
pub const TWINS_SCHEDULER: i32 = 7;
/// `WFQ_SCHEDULER` of AGIOS.
pub const WFQ_SCHEDULER: i32 = 8;
/// `IO_SCHEDULER_COUNT` of AGIOS: the number of AGIOS algorithms.
pub const IO_SCHEDULER_COUNT: i32 = 9;
/// The identifier of iosets' registry policy `i` is `IOSETS_POLICY_BASE + i` (an extension).
pub const IOSETS_POLICY_BASE: i32 = 100;

/// AGIOS's names, by identifier (its `io_schedulers[]` table).
const AGIOS_NAMES: [&CStr; IO_SCHEDULER_COUNT as usize] = [
    c"MLF", c"TO-agg", c"SJF", c"aIOLi", c"TO", c"SW", c"NOOP", c"TWINS", c"WFQ",
];

/// The identifier of the algorithm `agios_init` set up, as AGIOS's global of the same name:
/// `SJF_SCHEDULER` until then (AGIOS's initial value), and kept after `agios_exit` (as in AGIOS).
///
/// C declares it `extern int32_t config_agios_default_algorithm;` (an `AtomicI32` has the size,
/// alignment and representation of an `int32_t`). C code reads it; it must not write it.
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static config_agios_default_algorithm: AtomicI32 = AtomicI32::new(SJF_SCHEDULER);

/// Records the algorithm of a successful `agios_init`.
pub(crate) fn set_default_algorithm(index: i32) {
    config_agios_default_algorithm.store(index, Ordering::Relaxed);
}

/// iosets' registry names, NUL-terminated, built once.
fn iosets_names() -> &'static [CString] {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    NAMES.get_or_init(|| {
        iosets_policy::registry::POLICIES
            .iter()
            .filter_map(|p| CString::new(p.name).ok())
            .collect()
    })
}

/// The identifier of algorithm `name`: an AGIOS name (exact, case-sensitive, as AGIOS compares),
/// else an iosets registry name (exact).
pub fn index_of(name: &str) -> Option<i32> {
    if let Some(i) = AGIOS_NAMES
        .iter()
        .position(|n| n.to_bytes() == name.as_bytes())
    {
        return i32::try_from(i).ok();
    }
    iosets_names()
        .iter()
        .position(|n| n.to_bytes() == name.as_bytes())
        .and_then(|i| i32::try_from(i).ok())
        .map(|i| IOSETS_POLICY_BASE + i)
}

/// The name of algorithm `index`, if it names one.
pub fn name_of(index: i32) -> Option<&'static CStr> {
    if let Some(n) = usize::try_from(index).ok().and_then(|i| AGIOS_NAMES.get(i)) {
        return Some(n);
    }
    let i = usize::try_from(index.checked_sub(IOSETS_POLICY_BASE)?).ok()?;
    iosets_names().get(i).map(CString::as_c_str)
}

/// `get_algorithm_name_from_index`: the name of algorithm `index` (`"SJF"` for
/// `SJF_SCHEDULER`), or NULL if `index` names none (as in AGIOS).
///
/// Ownership: the string is static; never free or modify it (AGIOS's signature says `char *`).
#[no_mangle]
pub extern "C" fn get_algorithm_name_from_index(index: i32) -> *mut c_char {
    guard(std::ptr::null_mut(), || {
        name_of(index).map_or(std::ptr::null_mut(), |n| n.as_ptr().cast_mut())
    })
}

/// `get_algorithm_from_string`: stores the identifier of the algorithm called `alg` in `*index`
/// and returns true; if no algorithm has that name, stores `SJF_SCHEDULER` (AGIOS's fallback) and
/// returns false. NULL `alg` returns false; NULL `index` returns false and stores nothing.
///
/// # Safety
/// `alg` must be NULL or NUL-terminated; `index` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn get_algorithm_from_string(alg: *const c_char, index: *mut i32) -> bool {
    guard(false, || {
        if index.is_null() {
            return false;
        }
        // SAFETY: non-NULL checked; NUL-terminated by the caller's contract.
        let name = (!alg.is_null()).then(|| unsafe { CStr::from_ptr(alg) });
        let found = name.and_then(|n| n.to_str().ok()).and_then(index_of);
        // SAFETY: non-NULL checked; writable by the caller's contract.
        unsafe { *index = found.unwrap_or(SJF_SCHEDULER) };
        found.is_some()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agios_indices_and_names_are_upstreams() {
        let upstream = [
            (MLF_SCHEDULER, "MLF"),
            (TOAGG_SCHEDULER, "TO-agg"),
            (SJF_SCHEDULER, "SJF"),
            (AIOLI_SCHEDULER, "aIOLi"),
            (TO_SCHEDULER, "TO"),
            (SW_SCHEDULER, "SW"),
            (NOOP_SCHEDULER, "NOOP"),
            (TWINS_SCHEDULER, "TWINS"),
            (WFQ_SCHEDULER, "WFQ"),
        ];
        assert_eq!(upstream.len(), IO_SCHEDULER_COUNT as usize);
        for (i, (index, name)) in upstream.into_iter().enumerate() {
            assert_eq!(index, i as i32);
            assert_eq!(index_of(name), Some(index));
            assert_eq!(name_of(index).unwrap().to_str().unwrap(), name);
        }
        assert_eq!(index_of("sjf"), Some(IOSETS_POLICY_BASE + position("sjf")));
        assert_eq!(index_of("FIFO"), None);
        assert_eq!(name_of(-1), None);
        assert_eq!(name_of(IO_SCHEDULER_COUNT), None);
        assert_eq!(name_of(IOSETS_POLICY_BASE - 1), None);
    }

    fn position(name: &str) -> i32 {
        iosets_policy::registry::POLICIES
            .iter()
            .position(|p| p.name == name)
            .unwrap() as i32
    }

    #[test]
    fn iosets_names_round_trip() {
        for p in iosets_policy::registry::POLICIES {
            let i = index_of(p.name).unwrap();
            assert!(i >= IOSETS_POLICY_BASE);
            assert_eq!(name_of(i).unwrap().to_str().unwrap(), p.name);
        }
    }

    #[test]
    fn c_entry_points_handle_null_and_unknown() {
        let mut i = -7;
        // SAFETY: valid C strings and a writable int, or NULL where NULL is being tested.
        unsafe {
            assert!(get_algorithm_from_string(c"TWINS".as_ptr(), &mut i));
            assert_eq!(i, TWINS_SCHEDULER);
            assert!(!get_algorithm_from_string(c"twin".as_ptr(), &mut i));
            assert_eq!(i, SJF_SCHEDULER);
            assert!(!get_algorithm_from_string(std::ptr::null(), &mut i));
            assert!(!get_algorithm_from_string(
                c"TO".as_ptr(),
                std::ptr::null_mut()
            ));
        }
        assert!(get_algorithm_name_from_index(IO_SCHEDULER_COUNT).is_null());
        // SAFETY: a non-NULL result is a static NUL-terminated string.
        let name = unsafe { CStr::from_ptr(get_algorithm_name_from_index(WFQ_SCHEDULER)) };
        assert_eq!(name, c"WFQ");
    }
}
