//! Counters of what the engine did (Table II of Gabriel's VolpexMPI
//! report and more), kept per rank. Counting is a plain add; only the
//! timers read the clock, and only when statistics were asked for (`--set
//! stats=1`).

use std::time::Instant;

/// Every counter of one rank.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Calls into the progress engine.
    pub progress_calls: u64,
    /// Readiness events of sockets with data to read.
    pub recv_ready: u64,
    /// Readiness events of sockets that could take data.
    pub send_ready: u64,
    /// Send-ready events that found nothing to send (the waste Gabriel's
    /// report counts).
    pub send_ready_idle: u64,
    /// Nanoseconds spent handling receive readiness.
    pub recv_handling_ns: u64,
    /// Nanoseconds spent handling send readiness.
    pub send_handling_ns: u64,
    pub eager_msgs: u64,
    pub eager_bytes: u64,
    pub rendezvous_msgs: u64,
    pub rendezvous_bytes: u64,
    /// Messages that arrived before their receive was posted.
    pub unexpected_msgs: u64,
    /// The longest the unexpected queue of any context grew.
    pub max_unexpected_queue: u64,
    /// Times the rank blocked in the kernel waiting for a peer.
    pub blocks: u64,
    /// Nanoseconds spent blocked.
    pub blocked_ns: u64,
    /// Times the progress helper thread woke up (to drive communication
    /// under `thread`, to decide whether to signal under `signal`).
    pub helper_wakeups: u64,
    /// Signals the helper thread sent the application thread (`signal`).
    pub signals_sent: u64,
    /// Signals whose handler ran with the communication state.
    pub signals_handled: u64,
    /// Rendezvous starts the signal handler answered (CTW or CTS).
    pub signal_rndv_answered: u64,
    /// Rendezvous starts the helper did not signal (the application thread
    /// was inside the library or had no non-blocking receive posted), and
    /// signals that arrived while it was inside: left to the next MPI call.
    pub signals_ignored: u64,
    /// Rendezvous messages the sender wrote straight into the receiver's
    /// buffer (clear to write), counted by the sender.
    pub direct_writes: u64,
    /// Of those, messages written into a receive the receiver had
    /// advertised before they left (no rendezvous at all).
    pub prematched_writes: u64,
    /// RWAPI writes copied straight into a peer's mapped heap (peers on
    /// this host; the target takes no part).
    pub rwapi_direct: u64,
    /// RWAPI writes sent through the engine (another host, a block outside
    /// the heap, a heap the kernel would not let this rank map, or
    /// `rwapi_direct=0`).
    pub rwapi_engine: u64,
    /// MPI one-sided operations carried out as loads and stores in a
    /// window's shared memory (members on this host; the target takes no
    /// part).
    pub rma_direct: u64,
    /// Blocking collectives run on shared flags (coll/shm.rs), not by
    /// messages.
    pub coll_flag_calls: u64,
    /// Rendezvous messages this rank read straight from their sender's
    /// memory (single copy, `process_vm_readv`).
    pub single_copy_reads: u64,
    /// Times this rank changed the way messages from a sender on its host
    /// travel (single copy or rings) because the other had become faster.
    pub path_switches: u64,
    /// Chunks of single-copy messages this rank, their sender, wrote into
    /// the receiver's buffer while the receiver read the others (copy help).
    pub helped_chunks: u64,
    /// Single-copy transfers done with `memcpy` through a peer's shared
    /// heap (`shm_heap`) instead of the kernel's cross-process copy.
    pub heap_copies: u64,
    /// Chunks of large RWAPI writes this rank, their target, copied for
    /// writers on its host while it polled (the writer copies the rest).
    pub rwapi_helped: u64,
    /// Frames that waited to leave over TCP with those after them in one
    /// `sendmsg` (runs of RWAPI writes or MPI puts to one rank).
    pub tcp_batched: u64,
    /// Replicated jobs: the most bytes of sent messages this replica's log
    /// held at once (at most `replica_log_bytes`, or one message above it).
    pub max_replica_log_bytes: u64,
    /// Replicated jobs: messages taken from the wire and dropped because
    /// this replica had them already.
    pub replica_duplicates: u64,
    /// Replicated jobs: times this replica turned to another replica of a
    /// sender rank (its source was lost) and asked it to resume.
    pub replica_resumes: u64,
    /// Replicated jobs with `replica_verify=hash`: messages whose hash
    /// differed from another replica's hash of the same message.
    pub replica_mismatches: u64,
    /// Replicated jobs: times this leader replica waited for a sibling to
    /// catch up with its decisions (`DECISIONS_AHEAD` in replica/).
    pub replica_decision_waits: u64,
}

/// How many counters there are.
pub const COUNTERS: usize = 36;

impl Counters {
    /// Names and values, in a stable order.
    pub fn fields(&self) -> [(&'static str, u64); COUNTERS] {
        [
            ("progress_calls", self.progress_calls),
            ("recv_ready", self.recv_ready),
            ("send_ready", self.send_ready),
            ("send_ready_idle", self.send_ready_idle),
            ("recv_handling_ns", self.recv_handling_ns),
            ("send_handling_ns", self.send_handling_ns),
            ("eager_msgs", self.eager_msgs),
            ("eager_bytes", self.eager_bytes),
            ("rendezvous_msgs", self.rendezvous_msgs),
            ("rendezvous_bytes", self.rendezvous_bytes),
            ("unexpected_msgs", self.unexpected_msgs),
            ("max_unexpected_queue", self.max_unexpected_queue),
            ("blocks", self.blocks),
            ("blocked_ns", self.blocked_ns),
            ("helper_wakeups", self.helper_wakeups),
            ("signals_sent", self.signals_sent),
            ("signals_handled", self.signals_handled),
            ("signal_rndv_answered", self.signal_rndv_answered),
            ("signals_ignored", self.signals_ignored),
            ("direct_writes", self.direct_writes),
            ("prematched_writes", self.prematched_writes),
            ("rwapi_direct", self.rwapi_direct),
            ("rwapi_engine", self.rwapi_engine),
            ("rma_direct", self.rma_direct),
            ("coll_flag_calls", self.coll_flag_calls),
            ("single_copy_reads", self.single_copy_reads),
            ("path_switches", self.path_switches),
            ("helped_chunks", self.helped_chunks),
            ("heap_copies", self.heap_copies),
            ("rwapi_helped", self.rwapi_helped),
            ("tcp_batched", self.tcp_batched),
            ("max_replica_log_bytes", self.max_replica_log_bytes),
            ("replica_duplicates", self.replica_duplicates),
            ("replica_resumes", self.replica_resumes),
            ("replica_mismatches", self.replica_mismatches),
            ("replica_decision_waits", self.replica_decision_waits),
        ]
    }

    /// What counter `name` counts (for the MPI tool interface); `None`
    /// for a name that is not a counter.
    pub fn describe(name: &str) -> Option<&'static str> {
        Some(match name {
            "progress_calls" => "calls into the progress engine",
            "recv_ready" => "readiness events of sockets with data to read",
            "send_ready" => "readiness events of sockets that could take data",
            "send_ready_idle" => "send-ready events that found nothing to send",
            "recv_handling_ns" => {
                "nanoseconds spent handling receive readiness (timed only with stats=1)"
            }
            "send_handling_ns" => {
                "nanoseconds spent handling send readiness (timed only with stats=1)"
            }
            "eager_msgs" => "messages sent eagerly",
            "eager_bytes" => "bytes of messages sent eagerly",
            "rendezvous_msgs" => "messages sent by rendezvous",
            "rendezvous_bytes" => "bytes of messages sent by rendezvous",
            "unexpected_msgs" => "messages that arrived before their receive was posted",
            "max_unexpected_queue" => "the longest the unexpected queue of any context grew",
            "blocks" => "times the rank blocked in the kernel waiting for a peer",
            "blocked_ns" => "nanoseconds spent blocked (timed only with stats=1)",
            "helper_wakeups" => "times the progress helper thread woke up",
            "signals_sent" => "signals the helper thread sent the application thread",
            "signals_handled" => "signals whose handler ran with the communication state",
            "signal_rndv_answered" => "rendezvous starts the signal handler answered",
            "signals_ignored" => "rendezvous starts and signals left to the next MPI call",
            "direct_writes" => "rendezvous messages written straight into the receiver's buffer",
            "prematched_writes" => {
                "of those, messages written into a receive advertised before they left"
            }
            "rwapi_direct" => "RWAPI writes copied straight into a peer's mapped heap",
            "rwapi_engine" => "RWAPI writes sent through the engine",
            "rma_direct" => {
                "MPI one-sided operations done as loads and stores in a window's shared memory"
            }
            "coll_flag_calls" => "blocking collectives run on shared flags, without messages",
            "single_copy_reads" => {
                "rendezvous messages read straight from the sender's memory (process_vm_readv)"
            }
            "path_switches" => {
                "times messages from a sender on this host changed way (single copy or rings) because the other had become faster"
            }
            "helped_chunks" => {
                "chunks of single-copy messages this rank, their sender, wrote into the receiver's buffer while the receiver read the others"
            }
            "heap_copies" => {
                "single-copy reads and writes done with memcpy through a peer's shared heap (shm_heap)"
            }
            "rwapi_helped" => {
                "chunks of large RWAPI writes this rank, their target, copied for the writer while it polled"
            }
            "tcp_batched" => {
                "frames that waited to leave over TCP with those after them in one sendmsg (runs of RWAPI writes or MPI puts)"
            }
            "max_replica_log_bytes" => {
                "replicated jobs: the most bytes of sent messages this replica's log held at once"
            }
            "replica_duplicates" => {
                "replicated jobs: messages dropped because this replica had taken them already"
            }
            "replica_resumes" => {
                "replicated jobs: times this replica turned to another replica of a sender whose replica it received from was lost"
            }
            "replica_mismatches" => {
                "replicated jobs, replica_verify=hash: messages whose hash differed from another replica's"
            }
            "replica_decision_waits" => {
                "replicated jobs: times this leader replica waited for a sibling to catch up with its wildcard decisions and choices"
            }
            _ => return None,
        })
    }

    fn field_mut(&mut self, name: &str) -> Option<&mut u64> {
        Some(match name {
            "progress_calls" => &mut self.progress_calls,
            "recv_ready" => &mut self.recv_ready,
            "send_ready" => &mut self.send_ready,
            "send_ready_idle" => &mut self.send_ready_idle,
            "recv_handling_ns" => &mut self.recv_handling_ns,
            "send_handling_ns" => &mut self.send_handling_ns,
            "eager_msgs" => &mut self.eager_msgs,
            "eager_bytes" => &mut self.eager_bytes,
            "rendezvous_msgs" => &mut self.rendezvous_msgs,
            "rendezvous_bytes" => &mut self.rendezvous_bytes,
            "unexpected_msgs" => &mut self.unexpected_msgs,
            "max_unexpected_queue" => &mut self.max_unexpected_queue,
            "blocks" => &mut self.blocks,
            "blocked_ns" => &mut self.blocked_ns,
            "helper_wakeups" => &mut self.helper_wakeups,
            "signals_sent" => &mut self.signals_sent,
            "signals_handled" => &mut self.signals_handled,
            "signal_rndv_answered" => &mut self.signal_rndv_answered,
            "signals_ignored" => &mut self.signals_ignored,
            "direct_writes" => &mut self.direct_writes,
            "prematched_writes" => &mut self.prematched_writes,
            "rwapi_direct" => &mut self.rwapi_direct,
            "rwapi_engine" => &mut self.rwapi_engine,
            "rma_direct" => &mut self.rma_direct,
            "coll_flag_calls" => &mut self.coll_flag_calls,
            "single_copy_reads" => &mut self.single_copy_reads,
            "path_switches" => &mut self.path_switches,
            "helped_chunks" => &mut self.helped_chunks,
            "heap_copies" => &mut self.heap_copies,
            "rwapi_helped" => &mut self.rwapi_helped,
            "tcp_batched" => &mut self.tcp_batched,
            "max_replica_log_bytes" => &mut self.max_replica_log_bytes,
            "replica_duplicates" => &mut self.replica_duplicates,
            "replica_resumes" => &mut self.replica_resumes,
            "replica_mismatches" => &mut self.replica_mismatches,
            "replica_decision_waits" => &mut self.replica_decision_waits,
            _ => return None,
        })
    }

    /// Adds another rank's or layer's counters (maxima stay maxima).
    pub fn merge(&mut self, other: &Counters) {
        for (name, v) in other.fields() {
            let f = self.field_mut(name).expect("own field");
            if name.starts_with("max_") {
                *f = (*f).max(v);
            } else {
                *f += v;
            }
        }
    }

    /// `name=value,name=value` (a key-value token without spaces).
    pub fn encode(&self) -> String {
        self.fields()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Parses [`Counters::encode`]; unknown names are ignored.
    pub fn decode(text: &str) -> Option<Counters> {
        let mut c = Counters::default();
        for item in text.split(',').filter(|s| !s.is_empty()) {
            let (k, v) = item.split_once('=')?;
            let v: u64 = v.parse().ok()?;
            if let Some(f) = c.field_mut(k) {
                *f = v;
            }
        }
        Some(c)
    }

    /// One JSON object (for `stats=json` and `stats_file`).
    pub fn to_json(&self, rank: u32) -> String {
        let body: Vec<String> = self
            .fields()
            .iter()
            .map(|(k, v)| format!("\"{k}\":{v}"))
            .collect();
        format!(
            "{{\"type\":\"counters\",\"rank\":{rank},{}}}",
            body.join(",")
        )
    }
}

/// Times a piece of work into a counter when timing is on.
pub struct Stopwatch(Option<Instant>);

impl Stopwatch {
    pub fn start(timing: bool) -> Stopwatch {
        Stopwatch(timing.then(Instant::now))
    }

    /// Adds the elapsed nanoseconds to `into`.
    pub fn stop(self, into: &mut u64) {
        if let Some(t) = self.0 {
            *into += t.elapsed().as_nanos() as u64;
        }
    }
}

/// A table of counters, one row per rank and a total.
pub fn table(rows: &[(u32, Counters)]) -> String {
    let mut total = Counters::default();
    for (_, c) in rows {
        total.merge(c);
    }
    let names = Counters::default().fields().map(|(k, _)| k);
    let mut out = format!("{:<22}", "counter");
    for (r, _) in rows {
        out.push_str(&format!(" {:>14}", format!("rank {r}")));
    }
    out.push_str(&format!(" {:>14}\n", "total"));
    for (i, name) in names.iter().enumerate() {
        out.push_str(&format!("{name:<22}"));
        for (_, c) in rows {
            out.push_str(&format!(" {:>14}", c.fields()[i].1));
        }
        out.push_str(&format!(" {:>14}\n", total.fields()[i].1));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_round_trip_and_merge() {
        let a = Counters {
            eager_msgs: 3,
            max_unexpected_queue: 5,
            ..Counters::default()
        };
        let b = Counters {
            eager_msgs: 4,
            max_unexpected_queue: 2,
            ..Counters::default()
        };
        assert_eq!(Counters::decode(&a.encode()), Some(a));
        let mut m = a;
        m.merge(&b);
        assert_eq!(m.eager_msgs, 7);
        assert_eq!(m.max_unexpected_queue, 5);
        assert!(Counters::decode("eager_msgs=x").is_none());
        assert!(table(&[(0, a), (1, b)]).contains("eager_msgs"));
        for (name, _) in a.fields() {
            assert!(
                Counters::describe(name).is_some(),
                "{name} has no description"
            );
        }
        assert!(a
            .to_json(2)
            .starts_with("{\"type\":\"counters\",\"rank\":2,"));
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        fn config() -> ProptestConfig {
            crate::prop_config()
        }

        fn any_counters() -> impl Strategy<Value = Counters> {
            proptest::collection::vec(any::<u64>(), COUNTERS).prop_map(|values| {
                let mut c = Counters::default();
                for ((name, _), v) in Counters::default().fields().iter().zip(values) {
                    *c.field_mut(name).expect("own field") = v;
                }
                c
            })
        }

        /// Items of the encoded form: known and unknown names, numbers in
        /// and out of range, missing `=`.
        fn counters_text() -> impl Strategy<Value = String> {
            let name = prop_oneof![
                Just("eager_msgs".to_string()),
                Just("max_unexpected_queue".to_string()),
                "[a-z_]{0,12}",
            ];
            let value = prop_oneof![
                any::<u64>().prop_map(|v| v.to_string()),
                "[0-9]{19,22}",
                "[-+0-9a-z= ]{0,6}",
            ];
            prop_oneof![
                any::<String>(),
                proptest::collection::vec(
                    (name, prop_oneof![Just("="), Just(""), Just("==")], value),
                    0..6
                )
                .prop_map(|items| {
                    items
                        .iter()
                        .map(|(n, eq, v)| format!("{n}{eq}{v}"))
                        .collect::<Vec<_>>()
                        .join(",")
                }),
            ]
        }

        proptest! {
            #![proptest_config(config())]

            #[test]
            fn prop_counters_decode_is_total(text in counters_text()) {
                let _ = Counters::decode(&text);
            }

            #[test]
            fn prop_counters_round_trip(c in any_counters()) {
                prop_assert_eq!(Counters::decode(&c.encode()), Some(c));
            }

            /// A newer rank's counters that this one does not know are skipped.
            #[test]
            fn prop_counters_skip_unknown_names(c in any_counters(), extra in "[a-z]{1,8}_new", v in any::<u64>()) {
                let text = format!("{extra}={v},{}", c.encode());
                prop_assert_eq!(Counters::decode(&text), Some(c));
            }
        }
    }
}
