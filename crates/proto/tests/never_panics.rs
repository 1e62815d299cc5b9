//! Decoding arbitrary bytes never panics, and every message survives a round trip.

use crate::strategies;

use iosets_proto::{decode, encode, frame_len, Bytes, Frame, OpCode, DEFAULT_MAX_FRAME};
use proptest::prelude::*;
use strategies::{header, request, response};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if bytes.len() >= 4 {
            let _ = frame_len(bytes[..4].try_into().unwrap(), DEFAULT_MAX_FRAME);
        }
        let _ = decode(Bytes::from(bytes));
    }

    #[test]
    fn mutated_frames_never_panic(
        h in header(),
        r in request(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        cut in any::<usize>(),
    ) {
        let mut enc = encode(&Frame::Request(h, r)).to_vec()[4..].to_vec();
        for (i, b) in flips {
            let n = enc.len();
            enc[i % n] ^= b;
        }
        let keep = cut % (enc.len() + 1);
        enc.truncate(keep.max(enc.len() / 2));
        let _ = decode(Bytes::from(enc));
    }

    #[test]
    fn requests_round_trip(h in header(), r in request()) {
        let f = Frame::Request(h, r);
        let enc = encode(&f).to_vec();
        let len = frame_len(enc[..4].try_into().unwrap(), DEFAULT_MAX_FRAME).unwrap();
        prop_assert_eq!(len, enc.len() - 4);
        prop_assert_eq!(decode(Bytes::from(enc[4..].to_vec())).unwrap(), f);
    }

    #[test]
    fn responses_round_trip(h in header(), resp in response()) {
        let f = Frame::Response(h, OpCode::Read, resp);
        let enc = encode(&f).to_vec();
        prop_assert_eq!(decode(Bytes::from(enc[4..].to_vec())).unwrap(), f);
    }
}
