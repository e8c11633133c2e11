//! cargo-fuzz target: `tandem::fuzzing::frame_header`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem::fuzzing::frame_header(data));
