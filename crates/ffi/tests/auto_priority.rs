//! Automatic priorities through the C API: with `auto_priority=true` a periodic job (a burst of
//! requests every 200 ms) is moved to its Set-10 priority once the runtime's job book has seen
//! enough of its phases, and `iosets_job_priority` reports it as automatic; without the option
//! nothing moves. Real time (the C API has no clock to drive), kept short: at most 30 periods.

use std::ffi::{c_char, CStr};
use std::mem::MaybeUninit;
use std::ptr;
use std::time::{Duration, Instant};

use iosets::iosets_priority_source::*;
use iosets::iosets_status::*;
use iosets::*;
use iosets_policy::set10::SetMapping;

const PERIOD: Duration = Duration::from_millis(200);
const BURST: u64 = 8;
const MAX_PERIODS: u32 = 30;

fn create(policy: &CStr, options: &[&CStr]) -> *mut iosets_scheduler {
    let ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
    let mut s = ptr::null_mut();
    // SAFETY: valid C strings, an array of `ptrs.len()` pointers, a writable out pointer.
    let st = unsafe { iosets_create(policy.as_ptr(), ptrs.as_ptr(), ptrs.len(), &mut s) };
    assert_eq!(st, IOSETS_OK);
    s
}

fn priority(s: *const iosets_scheduler, job: u64) -> (f64, i32) {
    let (mut value, mut source) = (-1.0, -1);
    // SAFETY: `s` is live; both out pointers are valid.
    let st = unsafe { iosets_job_priority(s, job, &mut value, &mut source) };
    assert_eq!(st, IOSETS_OK);
    (value, source)
}

/// One burst of job `job`: `BURST` 1 MiB writes, each served and completed at once.
fn burst(s: *const iosets_scheduler, job: u64, k: u64) {
    let mut b = MaybeUninit::<iosets_batch>::uninit();
    for r in 0..BURST {
        let offset = (k * BURST + r) << 20;
        // SAFETY: `s` is live; NULL user pointer and id_out are allowed.
        let st = unsafe {
            iosets_submit(
                s,
                job,
                job,
                offset,
                1 << 20,
                1,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        assert_eq!(st, IOSETS_OK);
        // SAFETY: `s` is live; `b` is writable.
        assert_eq!(unsafe { iosets_next(s, 1000, b.as_mut_ptr()) }, IOSETS_OK);
        // SAFETY: iosets_next returned IOSETS_OK, so `b` is filled in.
        let b = unsafe { b.assume_init_ref() };
        std::thread::sleep(Duration::from_millis(2));
        // SAFETY: `s` is live; `b.id` is in service.
        assert_eq!(unsafe { iosets_complete(s, b.id, b.length) }, IOSETS_OK);
    }
}

/// Runs the periodic job until its priority is automatic (or `MAX_PERIODS`); returns the periods
/// it took, if it moved.
fn periodic(s: *const iosets_scheduler, job: u64) -> Option<u32> {
    let start = Instant::now();
    for k in 0..MAX_PERIODS {
        let due = start + PERIOD * k;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        burst(s, job, u64::from(k));
        if priority(s, job).1 == IOSETS_PRIORITY_AUTO as i32 {
            return Some(k + 1);
        }
    }
    None
}

#[test]
fn a_periodic_job_gets_its_set10_priority() {
    let s = create(c"iosets", &[c"auto_priority=true", c"forget_idle_s=60"]);
    assert_eq!(priority(s, 7), (0.0, IOSETS_PRIORITY_NONE as i32));
    let periods = periodic(s, 7);
    let (value, source) = priority(s, 7);
    let mapping = SetMapping::default();
    let want = mapping
        .priority_of_set(mapping.set_of(PERIOD.as_secs_f64()).unwrap())
        .get();
    assert!(
        periods.is_some(),
        "no automatic priority after {MAX_PERIODS} periods: {value} (source {source})"
    );
    assert_eq!((value, source), (want, IOSETS_PRIORITY_AUTO as i32));

    // The control plane wins; clearing it puts the automatic priority back.
    // SAFETY: `s` is live; NULL `applied` is allowed.
    let st = unsafe { iosets_set_priority(s, 7, 3.0, ptr::null_mut()) };
    assert_eq!(st, IOSETS_OK);
    assert_eq!(priority(s, 7), (3.0, IOSETS_PRIORITY_CONTROL as i32));
    // SAFETY: `s` is live.
    assert_eq!(unsafe { iosets_clear_priority(s, 7) }, IOSETS_OK);
    assert_eq!(priority(s, 7), (want, IOSETS_PRIORITY_AUTO as i32));
    // SAFETY: `s` is live, NULL `value` is what is being tested.
    let st = unsafe { iosets_job_priority(s, 7, ptr::null_mut(), ptr::null_mut()) };
    assert_eq!(st, IOSETS_ERR_NULL);
    // SAFETY: `s` is live and no other thread uses it.
    unsafe { iosets_destroy(s) };
}

#[test]
fn without_the_option_nothing_moves() {
    let s = create(c"iosets", &[]);
    for k in 0..12 {
        burst(s, 9, k);
        std::thread::sleep(PERIOD / 4);
    }
    assert_eq!(priority(s, 9), (0.0, IOSETS_PRIORITY_NONE as i32));
    // SAFETY: `s` is live and no other thread uses it.
    unsafe { iosets_destroy(s) };
}

#[test]
fn book_options_are_checked() {
    for bad in [
        c"auto_priority=yes",
        c"forget_idle_s=0",
        c"forget_idle_s=-3",
        c"forget_idle_s=inf",
    ] {
        let mut s = ptr::null_mut();
        let opts = [bad.as_ptr()];
        // SAFETY: valid C strings and a writable out pointer.
        let st = unsafe { iosets_create(c"noop".as_ptr(), opts.as_ptr(), 1, &mut s) };
        assert_eq!(st, IOSETS_ERR_BAD_OPTION, "{bad:?}");
        assert!(s.is_null());
    }
}
