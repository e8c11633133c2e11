//! cargo-fuzz target: `tandem::fuzzing::hello_reply`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem::fuzzing::hello_reply(data));
