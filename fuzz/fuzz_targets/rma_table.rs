//! cargo-fuzz target: `tandem::fuzzing::rma_table`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem::fuzzing::rma_table(data));
