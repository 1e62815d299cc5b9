//! The native C API called from Rust, as C would call it: bad input is an error code, the panic
//! boundary holds, batches are answered exactly once. (The C tests in tests/c cover the same ground
//! from C, under valgrind.)

use std::ffi::{c_char, c_void, CStr};
use std::ptr;

use iosets::iosets_status::*;
use iosets::*;

fn create(policy: &CStr, options: &[&CStr]) -> (iosets_status, *mut iosets_scheduler) {
    let ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
    let mut s = ptr::null_mut();
    // SAFETY: valid C strings, an array of `ptrs.len()` pointers, a writable out pointer.
    let st = unsafe { iosets_create(policy.as_ptr(), ptrs.as_ptr(), ptrs.len(), &mut s) };
    (st, s)
}

fn last_error() -> String {
    let mut buf = vec![0 as c_char; 512];
    // SAFETY: `buf` holds 512 bytes.
    unsafe { iosets_last_error(buf.as_mut_ptr(), buf.len()) };
    // SAFETY: iosets_last_error NUL-terminates within the buffer.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn unknown_policy_and_bad_options_are_errors_with_messages() {
    let (st, s) = create(c"cfqq", &[]);
    assert_eq!(st, IOSETS_ERR_UNKNOWN_POLICY);
    assert!(s.is_null());
    assert!(last_error().contains("valid policies"), "{}", last_error());

    let (st, s) = create(c"wfq", &[c"weight.1=-2"]);
    assert_eq!(st, IOSETS_ERR_BAD_OPTION);
    assert!(s.is_null());
    assert!(last_error().contains("weight.1"), "{}", last_error());

    let (st, _) = create(c"wfq", &[c"no equals sign"]);
    assert_eq!(st, IOSETS_ERR_BAD_OPTION);

    // SAFETY: NULL arguments are what is being tested; the library checks them.
    let st = unsafe { iosets_create(ptr::null(), ptr::null(), 0, ptr::null_mut()) };
    assert_eq!(st, IOSETS_ERR_NULL);
}

#[test]
fn null_handle_is_an_error_for_every_call() {
    let null = ptr::null::<iosets_scheduler>();
    let mut b = std::mem::MaybeUninit::<iosets_batch>::uninit();
    // SAFETY: a NULL handle is what is being tested; the library checks it before any use.
    unsafe {
        assert_eq!(
            iosets_submit(null, 1, 1, 0, 1, 0, ptr::null_mut(), ptr::null_mut()),
            IOSETS_ERR_NULL
        );
        assert_eq!(iosets_next(null, 0, b.as_mut_ptr()), IOSETS_ERR_NULL);
        assert_eq!(iosets_complete(null, 1, 1), IOSETS_ERR_NULL);
        assert_eq!(iosets_fail(null, 1, 5), IOSETS_ERR_NULL);
        assert_eq!(iosets_shutdown(null), IOSETS_ERR_NULL);
        assert_eq!(iosets_check_balance(null), IOSETS_ERR_NULL);
        iosets_destroy(ptr::null_mut());
    }
}

#[test]
fn zero_length_and_double_completion_are_errors() {
    let (st, s) = create(c"noop", &[]);
    assert_eq!(st, IOSETS_OK);
    let mut payload = 7u32;
    let user = ptr::from_mut(&mut payload).cast::<c_void>();
    let mut id = 0u64;
    let mut b = std::mem::MaybeUninit::<iosets_batch>::uninit();
    // SAFETY: `s` is live until iosets_destroy; out pointers are valid.
    unsafe {
        assert_eq!(
            iosets_submit(s, 1, 1, 0, 0, 0, user, &mut id),
            IOSETS_ERR_BAD_REQUEST
        );
        assert_eq!(
            iosets_submit(s, 1, 1, 0, 10, 9, user, &mut id),
            IOSETS_ERR_BAD_REQUEST
        );
        assert_eq!(iosets_submit(s, 1, 1, 0, 10, 1, user, &mut id), IOSETS_OK);
        assert_eq!(iosets_next(s, 0, b.as_mut_ptr()), IOSETS_OK);
        let b = b.assume_init();
        assert_eq!((b.id, b.count, b.length), (id, 1, 10));
        assert_eq!(*b.users, user);
        assert_eq!(iosets_complete(s, b.id, 10), IOSETS_OK);
        assert_eq!(iosets_complete(s, b.id, 10), IOSETS_ERR_NOT_IN_SERVICE);
        assert_eq!(iosets_check_balance(s), IOSETS_OK);
        iosets_destroy(s);
    }
}

#[test]
fn every_status_has_a_message() {
    for code in -11..=2 {
        // SAFETY: iosets_strerror returns a static NUL-terminated string.
        let msg = unsafe { CStr::from_ptr(iosets_strerror(code)) };
        assert!(!msg.to_bytes().is_empty(), "code {code}");
    }
}

#[test]
fn many_threads_each_request_once() {
    let (st, s) = create(c"wfq", &[]);
    assert_eq!(st, IOSETS_OK);
    let handle = s as usize;
    const PER: usize = 2_000;
    let seen: Vec<std::sync::atomic::AtomicU32> = (0..4 * PER)
        .map(|_| std::sync::atomic::AtomicU32::new(0))
        .collect();
    let seen = &seen;
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..3)
            .map(|_| {
                scope.spawn(move || {
                    let s = handle as *const iosets_scheduler;
                    let mut b = std::mem::MaybeUninit::<iosets_batch>::uninit();
                    // SAFETY: the scheduler outlives the scope; `b` is written before being read.
                    while unsafe { iosets_next(s, -1, b.as_mut_ptr()) } == IOSETS_OK {
                        // SAFETY: IOSETS_OK means iosets_next wrote `b`.
                        let b = unsafe { b.assume_init_ref() };
                        for i in 0..b.count {
                            // SAFETY: `users` holds `count` entries until the batch is answered.
                            let n = unsafe { *b.users.add(i) } as usize;
                            seen[n].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        // SAFETY: live handle.
                        let st = unsafe { iosets_complete(s, b.id, b.length) };
                        assert_eq!(st, IOSETS_OK);
                    }
                })
            })
            .collect();
        let producers: Vec<_> = (0..4)
            .map(|p| {
                scope.spawn(move || {
                    let s = handle as *const iosets_scheduler;
                    for i in 0..PER {
                        let n = p * PER + i;
                        // SAFETY: live handle; the user pointer is only carried.
                        let st = unsafe {
                            iosets_submit(
                                s,
                                p as u64,
                                p as u64,
                                i as u64 * 10,
                                10,
                                0,
                                n as *mut c_void,
                                ptr::null_mut(),
                            )
                        };
                        assert_eq!(st, IOSETS_OK);
                    }
                })
            })
            .collect();
        for p in producers {
            p.join().unwrap();
        }
        // SAFETY: live handle.
        assert_eq!(unsafe { iosets_shutdown(handle as *const _) }, IOSETS_OK);
        for w in workers {
            w.join().unwrap();
        }
    });
    assert!(seen
        .iter()
        .all(|c| c.load(std::sync::atomic::Ordering::Relaxed) == 1));
    // SAFETY: all threads are joined; the handle is destroyed once.
    unsafe {
        assert_eq!(iosets_check_balance(s), IOSETS_OK);
        iosets_destroy(s);
    }
}
