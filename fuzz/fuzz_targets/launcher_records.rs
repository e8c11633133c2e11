//! cargo-fuzz target: the launcher's record decoder (the stream a rank's
//! host helper or a remote launcher sends), fed in two pieces split where
//! the first byte says.
#![no_main]

#[allow(dead_code)]
#[path = "../../crates/tandem-cli/src/launcher/channel.rs"]
mod channel;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&split, stream)) = data.split_first() else {
        return;
    };
    let at = usize::from(split).min(stream.len());
    let mut decoder = channel::Decoder::default();
    for piece in [&stream[..at], &stream[at..]] {
        decoder.push(piece);
        while let Ok(Some(record)) = decoder.next_record() {
            let _ = (record.kind(), record.text(), record.num::<u64>(1));
        }
    }
});
