//! The catalogue of benchmark kernels: their C sources (embedded, so an
//! installed `tandem` needs no source tree), rank counts and parameters.

/// The header every kernel includes.
pub const COMMON_HEADER: (&str, &str) = ("bench.h", include_str!("../../../bench/bench.h"));
/// The header of the RWAPI variants.
pub const RWAPI_HEADER: (&str, &str) = ("rw.h", include_str!("../../../bench/rw.h"));

/// One kernel parameter, passed to the program as NAME=VALUE.
#[derive(Debug)]
pub struct Param {
    pub name: &'static str,
    pub help: &'static str,
}

/// One kernel.
#[derive(Debug)]
pub struct Kernel {
    pub name: &'static str,
    pub source: &'static str,
    pub about: &'static str,
    /// Ranks when --np is not given.
    pub default_np: u32,
    pub min_np: u32,
    /// The rank count must be a perfect square.
    pub square_np: bool,
    /// Default for --sizes, as the user would write it (None: no sizes).
    pub default_sizes: Option<&'static str>,
    /// Whether the kernel is run for a fixed duration per batch.
    pub takes_duration: bool,
    pub params: &'static [Param],
    /// The same measurement with RWAPI writes in place of sends (run as the
    /// library `rwapi`), where there is one.
    pub rwapi: Option<RwapiVariant>,
    /// How the kernel runs with replicated ranks (see [`Replication`]).
    pub replication: Replication,
    /// A time to solution: one solve per launch (`--repeat` launches per
    /// library, interleaved), and with `--replicas` a configuration that
    /// loses one replica halfway through (`kill=PROCESS:STEP`).
    pub time_to_solution: bool,
}

/// How a kernel runs with replicated ranks: the replicas of a rank must
/// send the same messages, so a kernel whose messages depend on the clock
/// cannot run replicated as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replication {
    /// Its messages do not depend on the clock.
    Same,
    /// Its iterations per batch are calibrated by the clock: replicated
    /// launches get fixed counts (`iters=...`) from an unreplicated launch.
    FixedIterations,
    /// Its messages depend on the clock throughout: not replicated, for
    /// this reason.
    Refused(&'static str),
}

/// A kernel's RWAPI variant.
#[derive(Debug)]
pub struct RwapiVariant {
    /// Its C source (which includes the MPI kernel's file, for its body).
    pub source: &'static str,
    /// Parameters it takes beyond the kernel's (given to its launches
    /// alone).
    pub params: &'static [Param],
}

const P_SIZES: Param = Param {
    name: "sizes",
    help: "message sizes (use --sizes MIN:MAX[:FACTOR] or a comma list)",
};
const P_DURATION: Param = Param {
    name: "duration",
    help: "seconds per timed batch (--duration)",
};
const P_REPEAT: Param = Param {
    name: "repeat",
    help: "timed repetitions per point (--repeat)",
};
const P_WARMUP_S: Param = Param {
    name: "warmup",
    help: "seconds of warm-up per size (default: a quarter of duration)",
};
const P_WARMUP_N: Param = Param {
    name: "warmup",
    help: "untimed rounds before timing",
};

const P_ITERS: Param = Param {
    name: "iters",
    help: "iterations per batch, one count per size, in place of calibrating them to duration (replicated runs get an unreplicated launch's)",
};

const PAIR: &[Param] = &[P_SIZES, P_DURATION, P_REPEAT, P_WARMUP_S, P_ITERS];

/// How an RWAPI kernel's target learns that a write arrived (bench/rw.h).
const RW_NOTIFY: &[Param] = &[Param {
    name: "notify",
    help: "flag (default: the target polls the last byte of the write) or small (a small message after each write, Ben Fredj and Renault's usage pattern)",
}];

pub static KERNELS: &[Kernel] = &[
    Kernel {
        name: "pingpong",
        source: include_str!("../../../bench/pingpong.c"),
        about: "round trip between ranks 0 and 1 for a fixed duration per size (Ben Fredj and Renault)",
        default_np: 2,
        min_np: 2,
        square_np: false,
        default_sizes: Some("1:4m:4"),
        takes_duration: true,
        params: PAIR,
        rwapi: Some(RwapiVariant {
            source: include_str!("../../../bench/rw_pingpong.c"),
            params: RW_NOTIFY,
        }),
        replication: Replication::FixedIterations,
        time_to_solution: false,
    },
    Kernel {
        name: "bidir",
        source: include_str!("../../../bench/bidir.c"),
        about: "bidirectional round trip: both ranks send at once (Ben Fredj and Renault)",
        default_np: 2,
        min_np: 2,
        square_np: false,
        default_sizes: Some("1:4m:4"),
        takes_duration: true,
        params: PAIR,
        rwapi: Some(RwapiVariant {
            source: include_str!("../../../bench/rw_bidir.c"),
            params: RW_NOTIFY,
        }),
        replication: Replication::FixedIterations,
        time_to_solution: false,
    },
    Kernel {
        name: "burst",
        source: include_str!("../../../bench/burst.c"),
        about: "rank 0 sends as fast as it can, rank 1 counts (Ben Fredj and Renault)",
        default_np: 2,
        min_np: 2,
        square_np: false,
        default_sizes: Some("1:4m:4"),
        takes_duration: true,
        params: &[
            P_SIZES,
            P_DURATION,
            P_REPEAT,
            P_WARMUP_S,
            P_ITERS,
            Param {
                name: "window",
                help: "sends kept in flight (default 64)",
            },
        ],
        rwapi: Some(RwapiVariant {
            source: include_str!("../../../bench/rw_burst.c"),
            params: &[],
        }),
        replication: Replication::FixedIterations,
        time_to_solution: false,
    },
    Kernel {
        name: "overhead",
        source: include_str!("../../../bench/overhead.c"),
        about: "MPI_Isend/MPI_Irecv overhead and application availability, post-work-wait (Doerfler and Brightwell)",
        default_np: 2,
        min_np: 2,
        square_np: false,
        default_sizes: Some("8,1k,16k,64k,256k,1m"),
        takes_duration: false,
        params: &[
            P_SIZES,
            P_REPEAT,
            Param {
                name: "ops",
                help: "isend,irecv (default both)",
            },
            Param {
                name: "samples",
                help: "iterations per point; the point is their median (default 9)",
            },
            Param {
                name: "base",
                help: "transfer-time averaging threshold (default 1.03)",
            },
            Param {
                name: "stop",
                help: "stop threshold, times the transfer time (default 1.5)",
            },
            Param {
                name: "confirm",
                help: "points in a row above the stop threshold (default 2)",
            },
            Param {
                name: "step",
                help: "work added per point, as a fraction of the transfer time (default 0.05)",
            },
            Param {
                name: "max_points",
                help: "give up a series after this many points (default 200)",
            },
        ],
        rwapi: None,
        replication: Replication::Refused(
            "it decides from each process's clock how much work to add and when a series ends, so the replicas of a rank would send different messages",
        ),
        time_to_solution: false,
    },
    Kernel {
        name: "coll",
        source: include_str!("../../../bench/coll.c"),
        about: "alltoall, bcast, gather, scatter, p2p: barrier-start-op-barrier-end over rank counts (Noor, Alhaisoni and Liotta)",
        default_np: 4,
        min_np: 2,
        square_np: false,
        default_sizes: Some("1k,64k,1m"),
        takes_duration: false,
        params: &[
            P_SIZES,
            P_REPEAT,
            P_WARMUP_N,
            Param {
                name: "ops",
                help: "alltoall,bcast,gather,scatter,p2p (default: these, Noor et al.'s), also allreduce,reduce,reduce_scatter (float sums)",
            },
            Param {
                name: "nodes",
                help: "rank counts, comma list (default 2..np; named after the nodes of Noor et al., who ran one rank per node); one job is launched per count",
            },
        ],
        rwapi: None,
        replication: Replication::Same,
        time_to_solution: false,
    },
    Kernel {
        name: "alltoallv",
        source: include_str!("../../../bench/alltoallv.c"),
        about: "the Isend/Irecv/Waitall all-to-all of Gabriel's VolpexMPI case study, ~32 KiB per pair",
        default_np: 4,
        min_np: 1,
        square_np: false,
        default_sizes: Some("32k"),
        takes_duration: false,
        params: &[
            P_SIZES,
            P_REPEAT,
            P_WARMUP_N,
            Param {
                name: "spread",
                help: "per-pair counts vary by up to this fraction (default 0.15)",
            },
            Param {
                name: "iters",
                help: "exchanges per timed sample (default 10)",
            },
        ],
        rwapi: None,
        replication: Replication::Same,
        time_to_solution: false,
    },
    Kernel {
        name: "cannon",
        source: include_str!("../../../bench/cannon.c"),
        about: "Cannon's matrix multiplication with shifts overlapped with computation (Kumar et al.)",
        default_np: 4,
        min_np: 1,
        square_np: true,
        default_sizes: None,
        takes_duration: false,
        params: &[
            P_REPEAT,
            P_WARMUP_N,
            Param {
                name: "n",
                help: "matrix dimension, a multiple of sqrt(np) (default 512)",
            },
            Param {
                name: "overlap",
                help: "1: shifts overlap the multiplication (default); 0: after it",
            },
        ],
        rwapi: None,
        replication: Replication::Same,
        time_to_solution: false,
    },
    Kernel {
        name: "tts",
        source: include_str!("../../../bench/tts.c"),
        about: "time to solution of a fixed all-to-all computation that checks its result, unreplicated, \
                replicated and losing a replica halfway (the VolpexMPI report's experiment)",
        default_np: 4,
        min_np: 1,
        square_np: false,
        default_sizes: Some("32k"),
        takes_duration: false,
        params: &[
            Param {
                name: "sizes",
                help: "bytes between each pair of ranks per step, one size (--sizes)",
            },
            Param {
                name: "repeat",
                help: "launches per configuration, one solve each (--repeat; default 5)",
            },
            Param {
                name: "steps",
                help: "exchanges of the computation (default 1000); the -kill configurations lose their replica at steps/2",
            },
            Param {
                name: "spread",
                help: "per-pair counts vary by up to this fraction (default 0.15)",
            },
            Param {
                name: "kill",
                help: "PROCESS:STEP: that process (TANDEM_JOB_RANK) kills itself at STEP (given to the -kill configurations)",
            },
        ],
        rwapi: None,
        replication: Replication::Same,
        time_to_solution: true,
    },
];

/// The steps of the tts kernel when not given (as in bench/tts.c).
pub const TTS_STEPS: u64 = 1000;

/// The kernel named `name`.
pub fn find(name: &str) -> Option<&'static Kernel> {
    KERNELS.iter().find(|k| k.name == name)
}

impl Kernel {
    pub fn has_param(&self, name: &str) -> bool {
        self.params.iter().any(|p| p.name == name) || self.is_rwapi_param(name)
    }

    /// Whether `name` is a parameter of the RWAPI variant alone.
    pub fn is_rwapi_param(&self, name: &str) -> bool {
        self.rwapi_params().iter().any(|p| p.name == name)
    }

    /// The parameters of the RWAPI variant alone (none without one).
    pub fn rwapi_params(&self) -> &'static [Param] {
        self.rwapi.as_ref().map_or(&[], |v| v.params)
    }

    /// Whether the kernel calls one-sided communication, which replicated
    /// jobs refuse.
    pub fn uses_one_sided(&self) -> bool {
        self.source.contains("MPI_Win_")
    }

    /// Checks a rank count.
    pub fn check_np(&self, np: u32) -> Result<(), String> {
        if np < self.min_np {
            return Err(format!(
                "{} needs at least {} ranks",
                self.name, self.min_np
            ));
        }
        if self.square_np {
            let q = (np as f64).sqrt().round() as u32;
            if q * q != np {
                return Err(format!(
                    "{} needs a square number of ranks (1, 4, 9, 16, ...), not {np}",
                    self.name
                ));
            }
        }
        Ok(())
    }
}

/// Parses a byte count: 123, 64k, 4m, 1g (binary multiples).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1u64 << 10),
        Some((i, 'm' | 'M')) => (&t[..i], 1u64 << 20),
        Some((i, 'g' | 'G')) => (&t[..i], 1u64 << 30),
        _ => (t, 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|v| v.checked_mul(mult))
        .filter(|&v| v <= 1 << 30)
        .ok_or_else(|| format!("'{text}' is not a byte count (e.g. 8, 64k, 4m; at most 1g)"))
}

/// Expands a size specification: `MIN:MAX` (powers of two; 0 allowed as
/// the first), `MIN:MAX:FACTOR`, or a comma list.
pub fn parse_sizes(spec: &str) -> Result<Vec<u64>, String> {
    let spec = spec.trim();
    let sizes = if spec.contains(':') {
        let parts: Vec<&str> = spec.split(':').collect();
        if parts.len() > 3 {
            return Err(format!(
                "--sizes {spec}: expected MIN:MAX or MIN:MAX:FACTOR"
            ));
        }
        let min = parse_bytes(parts[0])?;
        let max = parse_bytes(parts[1])?;
        let factor: u64 = match parts.get(2) {
            Some(f) => f.parse().ok().filter(|&f| f >= 2).ok_or_else(|| {
                format!("--sizes {spec}: the factor must be an integer of at least 2")
            })?,
            None => 2,
        };
        if min > max {
            return Err(format!("--sizes {spec}: MIN is larger than MAX"));
        }
        let mut v = Vec::new();
        let mut s = min;
        if s == 0 {
            v.push(0);
            s = 1;
        }
        while s <= max {
            v.push(s);
            s *= factor;
        }
        v
    } else {
        spec.split(',')
            .map(parse_bytes)
            .collect::<Result<Vec<u64>, String>>()?
    };
    if sizes.is_empty() {
        return Err(format!("--sizes {spec}: no sizes"));
    }
    if sizes.len() > 64 {
        return Err(format!("--sizes {spec}: more than 64 sizes"));
    }
    Ok(sizes)
}

/// A byte count for people: 512 B, 64 KiB, 4 MiB.
pub fn size_text(s: u64) -> String {
    if s >= 1 << 20 && s.is_multiple_of(1 << 20) {
        format!("{} MiB", s >> 20)
    } else if s >= 1024 && s.is_multiple_of(1024) {
        format!("{} KiB", s >> 10)
    } else {
        format!("{s} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_sizes("1:8").unwrap(), vec![1, 2, 4, 8]);
        assert_eq!(parse_sizes("0:4").unwrap(), vec![0, 1, 2, 4]);
        assert_eq!(parse_sizes("1k:1m:32").unwrap(), vec![1024, 32768, 1 << 20]);
        assert_eq!(parse_sizes("8, 64k,4m").unwrap(), vec![8, 65536, 4 << 20]);
        assert!(parse_sizes("8:1").is_err());
        assert!(parse_sizes("1:8:1").is_err());
        assert!(parse_sizes("2g").is_err());
        assert!(parse_sizes("x").is_err());
        assert_eq!(size_text(65536), "64 KiB");
        assert_eq!(size_text(100), "100 B");
    }

    #[test]
    fn catalogue() {
        for k in KERNELS {
            assert!(k.source.contains("#include \"bench.h\""), "{}", k.name);
            assert!(k.check_np(k.default_np).is_ok(), "{}", k.name);
            if let Some(s) = k.default_sizes {
                assert!(parse_sizes(s).is_ok(), "{}", k.name);
                assert!(k.has_param("sizes"));
            }
        }
        assert!(find("cannon").unwrap().check_np(3).is_err());
        // Rust and C agree on the solve's default length.
        let tts = find("tts").unwrap();
        assert!(tts.time_to_solution);
        assert!(
            tts.source
                .contains(&format!("bench_param_long(\"steps\", {TTS_STEPS},")),
            "bench/tts.c's default steps differ from TTS_STEPS"
        );
        assert!(KERNELS.iter().all(|k| !k.uses_one_sided()));
        assert!(find("pingpong").unwrap().check_np(1).is_err());
    }
}
