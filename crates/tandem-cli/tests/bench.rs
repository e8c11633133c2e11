//! `tandem bench` end to end: every kernel built with `tandem cc` and run
//! on Tandem at a tiny duration, its JSON, CSV and SVG outputs checked;
//! compare (against Open MPI when it is installed), model and report; and
//! the errors a user meets. Timings are never asserted on.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use common::{run_command, Outcome, TANDEM};

const BENCH_TIMEOUT: Duration = Duration::from_secs(120);

fn out_dir(test: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("bench")
        .join(test);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create the test's output directory");
    d
}

fn bench(args: &[&str]) -> Outcome {
    let mut cmd = Command::new(TANDEM);
    cmd.arg("bench").args(args);
    run_command(cmd, BENCH_TIMEOUT)
}

fn ok(o: &Outcome) {
    assert!(o.status.success(), "{}", o.describe());
    assert!(
        o.leftovers.is_empty(),
        "processes left: {:?}\n{}",
        o.leftovers,
        o.describe()
    );
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()))
}

/// A minimal well-formedness check of an SVG document: an <svg> root, every
/// element closed in order.
fn assert_valid_svg(text: &str) {
    let t = text.trim();
    assert!(
        t.starts_with("<svg"),
        "does not start with <svg: {}",
        &t[..t.len().min(80)]
    );
    assert!(
        t.contains("xmlns=\"http://www.w3.org/2000/svg\""),
        "no SVG namespace"
    );
    let mut stack: Vec<String> = Vec::new();
    let mut rest = t;
    while let Some(i) = rest.find('<') {
        let end = rest[i..].find('>').expect("unterminated tag") + i;
        let tag = &rest[i + 1..end];
        if let Some(name) = tag.strip_prefix('/') {
            let open = stack
                .pop()
                .unwrap_or_else(|| panic!("</{name}> closes nothing"));
            assert_eq!(open, name.trim(), "</{name}> closes <{open}>");
        } else if !tag.ends_with('/') && !tag.starts_with('?') && !tag.starts_with('!') {
            let name: String = tag.chars().take_while(|c| !c.is_whitespace()).collect();
            stack.push(name);
        }
        rest = &rest[end + 1..];
    }
    assert!(stack.is_empty(), "unclosed elements: {stack:?}");
}

/// A PNG file's signature and its IHDR chunk (which must come first):
/// returns the image's width and height.
fn assert_valid_png(bytes: &[u8]) -> (u32, u32) {
    assert!(
        bytes.starts_with(&[0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n']),
        "no PNG signature: {:?}",
        &bytes[..bytes.len().min(8)]
    );
    assert!(bytes.len() > 33, "{} bytes", bytes.len());
    let word = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
    assert_eq!(word(8), 13, "IHDR length");
    assert_eq!(&bytes[12..16], b"IHDR");
    let (w, h) = (word(16), word(20));
    assert!(w > 0 && h > 0, "{w}x{h}");
    // Bit depth 8, colour type 2 (RGB), then compression, filter, interlace 0.
    assert_eq!(&bytes[24..29], &[8, 2, 0, 0, 0]);
    assert!(
        bytes.ends_with(&[0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xae, 0x42, 0x60, 0x82]),
        "no IEND chunk at the end"
    );
    (w, h)
}

/// Checks the JSON document of a kernel run: machine, versions,
/// parameters, records of `record_type`, and a table of `rows` rows.
fn check_document(doc: &Value, kernel: &str, record_type: &str, rows: usize) {
    assert_eq!(doc["kernel"], kernel);
    assert!(doc["machine"]["cores"].as_u64().unwrap_or(0) >= 1, "{doc}");
    assert!(!doc["machine"]["date"].as_str().unwrap_or("").is_empty());
    let runs = doc["runs"].as_array().expect("runs");
    assert!(!runs.is_empty());
    for r in runs {
        assert!(
            r["library_version"]
                .as_str()
                .unwrap_or("")
                .contains("Tandem"),
            "{r}"
        );
        let recs = r["records"].as_array().expect("records");
        assert!(
            recs.iter().any(|x| x["type"] == record_type),
            "no {record_type} record in {r}"
        );
    }
    let table = &doc["tables"][0][1];
    let table_rows = table["rows"].as_array().expect("rows");
    assert_eq!(table_rows.len(), rows, "{table}");
    for row in table_rows {
        let first = &row["values"][0];
        assert!(first["median"].as_f64().is_some(), "{row}");
        assert!(first["lo"].as_f64().unwrap() <= first["hi"].as_f64().unwrap());
    }
}

/// Runs a kernel with --json, --csv and --plot (an SVG file) and checks
/// all three.
fn kernel_end_to_end(kernel: &str, args: &[&str], record_type: &str, rows: usize) -> Value {
    kernel_end_to_end_plot(kernel, args, record_type, rows, "svg")
}

/// The same with a plot of type `plot` (svg or png).
fn kernel_end_to_end_plot(
    kernel: &str,
    args: &[&str],
    record_type: &str,
    rows: usize,
    plot: &str,
) -> Value {
    let dir = out_dir(kernel);
    let (json, csv, svg) = (
        dir.join("r.json"),
        dir.join("r.csv"),
        dir.join(format!("r.{plot}")),
    );
    let mut all = vec![kernel];
    all.extend_from_slice(args);
    let (j, c, s) = (
        json.to_str().unwrap().to_string(),
        csv.to_str().unwrap().to_string(),
        svg.to_str().unwrap().to_string(),
    );
    all.extend_from_slice(&["--json", &j, "--csv", &c, "--plot", &s]);
    let o = bench(&all);
    ok(&o);
    assert!(o.stdout.contains("confidence interval"), "{}", o.describe());
    let doc = read_json(&json);
    check_document(&doc, kernel, record_type, rows);
    let csv_text = std::fs::read_to_string(&csv).expect("csv");
    assert_eq!(csv_text.lines().count(), rows + 1, "{csv_text}");
    assert!(csv_text.starts_with("mpi,"));
    if plot == "png" {
        let size = assert_valid_png(&std::fs::read(&svg).expect("png"));
        assert_eq!(size, (900, 560));
    } else {
        assert_valid_svg(&std::fs::read_to_string(&svg).expect("svg"));
    }
    doc
}

#[test]
fn pingpong_kernel() {
    let doc = kernel_end_to_end_plot(
        "pingpong",
        &["--sizes", "1,64k", "--duration", "0.005", "--repeat", "3"],
        "sample",
        2,
        "png",
    );
    assert_eq!(doc["params"]["sizes"], "1,65536");
    let table = &doc["tables"][0][1];
    assert_eq!(table["metrics"][0]["name"], "latency");
}

#[test]
fn bidir_kernel() {
    kernel_end_to_end(
        "bidir",
        &["--sizes", "8:512:8", "--duration", "0.005", "--repeat", "2"],
        "sample",
        3,
    );
}

#[test]
fn burst_kernel() {
    kernel_end_to_end(
        "burst",
        &[
            "--sizes",
            "16,4k",
            "--duration",
            "0.005",
            "--repeat",
            "2",
            "--set",
            "window=8",
        ],
        "sample",
        2,
    );
}

#[test]
fn overhead_kernel() {
    let doc = kernel_end_to_end(
        "overhead",
        &["--sizes", "8,4k", "--repeat", "2", "--set", "samples=3"],
        "ovh_point",
        4,
    );
    let rows = doc["tables"][0][1]["rows"].as_array().unwrap().clone();
    let ops: Vec<&str> = rows
        .iter()
        .map(|r| r["keys"][0][1].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["isend", "isend", "irecv", "irecv"]);
    for r in &rows {
        let avail = r["values"][1]["median"].as_f64().unwrap();
        assert!((0.0..=100.0).contains(&avail), "{r}");
    }
}

#[test]
fn alltoallv_kernel() {
    kernel_end_to_end(
        "alltoallv",
        &[
            "--np", "3", "--repeat", "2", "--set", "iters=2", "--sizes", "4k,32k",
        ],
        "a2av",
        2,
    );
}

#[test]
fn cannon_kernel() {
    let doc = kernel_end_to_end(
        "cannon",
        &["--np", "4", "--repeat", "2", "--set", "n=64"],
        "cannon",
        1,
    );
    for rec in doc["runs"][0]["records"].as_array().unwrap() {
        assert_eq!(rec["ok"], true, "wrong product: {rec}");
    }
}

#[test]
fn coll_kernel() {
    let dir = out_dir("coll");
    let json = dir.join("r.json");
    let o = bench(&[
        "coll",
        "--np",
        "3",
        "--sizes",
        "1k",
        "--repeat",
        "3",
        "--json",
        json.to_str().unwrap(),
    ]);
    ok(&o);
    // 5 ops x 1 size x rank counts 2 and 3.
    check_document(&read_json(&json), "coll", "coll", 10);
}

#[test]
fn coll_kernel_reductions() {
    let dir = out_dir("coll-reductions");
    let json = dir.join("r.json");
    let o = bench(&[
        "coll",
        "--np",
        "2",
        "--sizes",
        "3,64k",
        "--repeat",
        "3",
        "--set",
        "ops=allreduce,reduce,reduce_scatter",
        "--json",
        json.to_str().unwrap(),
    ]);
    ok(&o);
    // 3 ops x 2 sizes x rank count 2.
    let doc = read_json(&json);
    check_document(&doc, "coll", "coll", 6);
    let ops: std::collections::BTreeSet<&str> = doc["runs"][0]["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["op"].as_str())
        .collect();
    assert_eq!(
        ops,
        ["allreduce", "reduce", "reduce_scatter"].into(),
        "{doc}"
    );
    let bad = bench(&["coll", "--np", "2", "--set", "ops=allreduce,telepathy"]);
    assert!(!bad.status.success());
    assert!(bad.stderr.contains("reduce_scatter"), "{}", bad.describe());
}

/// Ben Fredj and Renault's comparison: RWAPI writes beside MPI send/receive,
/// for each of the three fixed-duration kernels, on shared memory and TCP.
#[test]
fn compare_rwapi_with_mpi() {
    for kernel in ["pingpong", "bidir", "burst"] {
        for transport in ["shm", "tcp"] {
            let dir = out_dir(&format!("rwapi-{kernel}-{transport}"));
            let json = dir.join("c.json");
            let o = bench(&[
                "compare",
                kernel,
                "--mpi",
                "rwapi,tandem",
                "--transport",
                transport,
                "--sizes",
                "8,64k,1m",
                "--duration",
                "0.005",
                "--repeat",
                "2",
                "--json",
                json.to_str().unwrap(),
            ]);
            ok(&o);
            assert!(o.stdout.contains("tandem/rwapi"), "{}", o.describe());
            assert!(
                o.stdout.contains("ran in the same launches"),
                "{}",
                o.describe()
            );
            let doc = read_json(&json);
            // One launch timed both, and its samples went to each by API.
            assert_eq!(
                doc["shared_launches"],
                serde_json::json!(["rwapi", "tandem"])
            );
            // (2 rounds of one repetition: each launch gives a run per API.)
            let runs = doc["runs"].as_array().expect("runs");
            assert_eq!(runs.len(), 4, "{doc}");
            for pair in runs.chunks(2) {
                assert_eq!(pair[0]["mpi"], "rwapi", "{doc}");
                assert_eq!(pair[1]["mpi"], "tandem", "{doc}");
                assert_eq!(pair[0]["command"], pair[1]["command"], "{doc}");
                assert!(
                    pair[0]["command"].as_str().unwrap().contains("with=mpi"),
                    "{doc}"
                );
            }
            for run in runs {
                let samples: Vec<_> = run["records"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|r| r["type"] == "sample")
                    .collect();
                // 3 sizes x 1 repetition.
                assert_eq!(samples.len(), 3, "{run}");
                assert!(samples.iter().all(|r| r.get("api").is_none()), "{run}");
            }
            let tables = doc["tables"].as_array().expect("tables");
            assert_eq!(tables.len(), 2, "{doc}");
            assert_eq!(tables[0][0], "rwapi");
            for t in tables {
                let rows = t[1]["rows"].as_array().expect("rows");
                assert_eq!(rows.len(), 3, "{t}");
                for row in rows {
                    assert!(row["values"][0]["median"].as_f64().unwrap() > 0.0, "{row}");
                }
            }
        }
    }
    // Apart when asked: one launch each, each the kernel of its API.
    let dir = out_dir("rwapi-apart");
    let json = dir.join("c.json");
    let o = bench(&[
        "compare",
        "pingpong",
        "--mpi",
        "rwapi,tandem",
        "--separate-launches",
        "--set",
        "notify=small",
        "--sizes",
        "8",
        "--duration",
        "0.005",
        "--repeat",
        "2",
        "--rounds",
        "1",
        "--json",
        json.to_str().unwrap(),
    ]);
    ok(&o);
    assert!(
        !o.stdout.contains("ran in the same launches"),
        "{}",
        o.describe()
    );
    let doc = read_json(&json);
    assert!(doc["shared_launches"].is_null(), "{doc}");
    let runs = doc["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "{doc}");
    assert_ne!(runs[0]["command"], runs[1]["command"], "{doc}");
    // The RWAPI variant's own parameter goes to its launches alone.
    let with_notify =
        |r: &serde_json::Value| r["command"].as_str().unwrap().contains("notify=small");
    assert!(with_notify(&runs[0]) && !with_notify(&runs[1]), "{doc}");
    let o = bench(&["pingpong", "--set", "notify=small"]);
    assert!(!o.status.success());
    assert!(o.stderr.contains("RWAPI variant"), "{}", o.describe());
    assert!(
        runs.iter()
            .all(|r| !r["command"].as_str().unwrap().contains("with=")),
        "{doc}"
    );
    // Kernels without an RWAPI variant say so.
    let o = bench(&["compare", "overhead", "--mpi", "rwapi,tandem"]);
    assert!(!o.status.success());
    assert!(o.stderr.contains("no RWAPI variant"), "{}", o.describe());
}

/// The runs of library `lib` in a kernel's JSON document.
fn runs_of<'a>(doc: &'a Value, lib: &str) -> Vec<&'a Value> {
    doc["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter(|r| r["mpi"] == lib)
        .collect()
}

fn table_names(doc: &Value) -> Vec<String> {
    doc["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .map(|t| t[0].as_str().unwrap_or("").to_string())
        .collect()
}

/// `--replicas 1,2`: Tandem unreplicated and with 2 replicas per rank in
/// one run, launches interleaved, side by side with ratios.
#[test]
fn replicated_beside_unreplicated() {
    let dir = out_dir("replicas");
    let json = dir.join("r.json");
    let o = bench(&[
        "pingpong",
        "--replicas",
        "1,2",
        "--sizes",
        "8,64k",
        "--duration",
        "0.005",
        "--repeat",
        "2",
        "--json",
        json.to_str().unwrap(),
    ]);
    ok(&o);
    assert!(o.stdout.contains("tandem-r2/tandem"), "{}", o.describe());
    assert!(
        o.stdout
            .contains("tandem-r2: every rank runs as 2 processes"),
        "{}",
        o.describe()
    );
    let doc = read_json(&json);
    assert_eq!(table_names(&doc), ["tandem", "tandem-r2"], "{doc}");
    for t in doc["tables"].as_array().unwrap() {
        let rows = t[1]["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 2, "{t}");
        assert!(rows[0]["values"][0]["median"].as_f64().unwrap() > 0.0);
    }
    // Two rounds of one repetition each, in alternating order.
    let order: Vec<&str> = doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["mpi"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["tandem", "tandem-r2", "tandem-r2", "tandem"]);
    for r in runs_of(&doc, "tandem-r2") {
        let command = r["command"].as_str().unwrap();
        assert!(command.contains(" run -n 2 --replicas 2 "), "{command}");
    }
    for r in runs_of(&doc, "tandem") {
        let command = r["command"].as_str().unwrap();
        assert!(!command.contains("--replicas"), "{command}");
    }

    // RWAPI cannot be replicated: skipped with a note, the rest measured.
    let o = bench(&[
        "compare",
        "pingpong",
        "--mpi",
        "rwapi,tandem",
        "--replicas",
        "1,2",
        "--sizes",
        "8",
        "--duration",
        "0.005",
        "--repeat",
        "2",
    ]);
    ok(&o);
    assert!(
        o.stdout
            .contains("rwapi-r2 skipped for pingpong: replicated jobs refuse RWAPI"),
        "{}",
        o.describe()
    );
    assert!(
        o.stdout.contains("tandem/rwapi") && o.stdout.contains("tandem-r2/rwapi"),
        "{}",
        o.describe()
    );
    let o = bench(&["pingpong", "--mpi", "rwapi", "--replicas", "2"]);
    assert!(!o.status.success());
    assert!(o.stderr.contains("nothing left to run"), "{}", o.describe());
}

/// The VolpexMPI report's experiment: the same checked computation
/// unreplicated, with 2 replicas, and with 2 replicas of which one is
/// killed halfway; every solve verifies.
#[test]
fn time_to_solution_with_a_replica_killed_halfway() {
    let dir = out_dir("tts");
    let json = dir.join("r.json");
    let o = bench(&[
        "tts",
        "--mpi",
        "tandem",
        "--np",
        "2",
        "--repeat",
        "2",
        "--set",
        "steps=40",
        "--sizes",
        "4k",
        "--json",
        json.to_str().unwrap(),
    ]);
    ok(&o);
    for line in [
        "tandem: 2 of 2 solves verified",
        "tandem-r2: 2 of 2 solves verified",
        "tandem-r2-kill: 2 of 2 solves verified; 2 of 2 launches lost a replica and went on",
        "every solve gave the result",
        "process 3 (replica 1 of rank 1) kills itself (SIGKILL) at step 20 of 40",
        "tandem-r2-kill/tandem",
    ] {
        assert!(o.stdout.contains(line), "no {line:?}: {}", o.describe());
    }
    let doc = read_json(&json);
    assert_eq!(
        table_names(&doc),
        ["tandem", "tandem-r2", "tandem-r2-kill"],
        "{doc}"
    );
    // One solve per launch, two launches per configuration.
    for lib in ["tandem", "tandem-r2", "tandem-r2-kill"] {
        let runs = runs_of(&doc, lib);
        assert_eq!(runs.len(), 2, "{lib}: {doc}");
        for r in runs {
            let solves: Vec<&Value> = r["records"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|x| x["type"] == "tts")
                .collect();
            assert_eq!(solves.len(), 1, "{r}");
            assert_eq!(solves[0]["ok"], true, "{r}");
            assert_eq!(solves[0]["bad_blocks"], 0, "{r}");
            assert!(solves[0]["wall"].as_f64().unwrap() > 0.0, "{r}");
            let command = r["command"].as_str().unwrap();
            let notes = r["launcher_notes"].to_string();
            if lib == "tandem-r2-kill" {
                assert!(command.contains("kill=3:20"), "{command}");
                assert!(
                    notes.contains("rank 1 replica 1") && notes.contains("killed by signal 9"),
                    "{r}"
                );
            } else {
                assert!(!command.contains("kill="), "{command}");
                assert!(!notes.contains("killed"), "{r}");
            }
        }
    }
    let verified = &doc["tables"][2][1]["rows"][0]["values"][2];
    assert_eq!(verified["median"], 100.0, "{doc}");

    // One problem at a time.
    let o = bench(&["tts", "--mpi", "tandem", "--sizes", "1k,2k"]);
    assert!(!o.status.success());
    assert!(o.stderr.contains("one size"), "{}", o.describe());
}

#[test]
fn compare_with_open_mpi() {
    let installed = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("mpicc.openmpi").is_file()))
        .unwrap_or(false);
    if !installed {
        eprintln!("SKIP compare_with_open_mpi: Open MPI is not installed");
        return;
    }
    let dir = out_dir("compare");
    let svg = dir.join("c.svg");
    let o = bench(&[
        "compare",
        "pingpong",
        "--mpi",
        "tandem,openmpi",
        "--sizes",
        "1,4k",
        "--duration",
        "0.005",
        "--repeat",
        "2",
        "--rounds",
        "2",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    ok(&o);
    assert!(o.stdout.contains("openmpi/tandem"), "{}", o.describe());
    assert!(o.stdout.contains("Open MPI"), "{}", o.describe());
    let text = std::fs::read_to_string(&svg).unwrap();
    assert_valid_svg(&text);
    assert!(text.contains("openmpi") && text.contains("tandem"));
}

#[test]
fn model_from_measurements() {
    let dir = out_dir("model");
    let (json, svg) = (dir.join("m.json"), dir.join("m.svg"));
    let o = bench(&[
        "model",
        "--duration",
        "0.003",
        "--repeat",
        "2",
        "--coll-np",
        "0",
        "--set",
        "tcp_send_chunk=512k",
        "--json",
        json.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    ok(&o);
    for word in ["Hockney", "LogGP", "o_s", "predicted within 15%"] {
        assert!(o.stdout.contains(word), "no {word}: {}", o.describe());
    }
    let doc = read_json(&json);
    // A fit exists unless noise bent the line backwards; never assert on
    // how well it fits (that depends on the machine).
    let fits: Vec<&Value> = ["hockney", "piecewise"]
        .iter()
        .map(|k| &doc[*k])
        .filter(|f| f.is_object())
        .collect();
    assert!(!fits.is_empty(), "no Hockney fit: {doc}");
    for f in fits {
        assert!(f["segments"][0]["b"].as_f64().unwrap() > 0.0, "{f}");
    }
    // Every power of two from 1 B to 16 MiB, and halfway sizes (3 x 2^k)
    // where the machine's memory cells need more (which depends on its
    // caches); each with its fastest and median time.
    let pingpong = doc["pingpong"].as_array().unwrap();
    let sizes: Vec<u64> = pingpong
        .iter()
        .map(|p| p["size"].as_f64().unwrap() as u64)
        .collect();
    for k in 0..=24 {
        assert!(sizes.contains(&(1 << k)), "no {} B: {sizes:?}", 1u64 << k);
    }
    for m in &sizes {
        let odd = m >> m.trailing_zeros();
        assert!(odd == 1 || odd == 3, "{m} B: {sizes:?}");
    }
    for p in pingpong {
        assert!(
            p["measured"].as_f64().unwrap() <= p["median"].as_f64().unwrap(),
            "{p}"
        );
    }
    // The regimes are recorded: over TCP at least tcp_send_chunk's limit,
    // when one is set.
    let limits = doc["protocols"]["bandwidth"].as_array().unwrap();
    assert!(limits.iter().any(|b| b["name"] == "one send call"), "{doc}");
    assert_valid_svg(&std::fs::read_to_string(&svg).unwrap());
}

#[test]
fn report_page() {
    let dir = out_dir("report");
    let o = bench(&[
        "report",
        "--out",
        dir.to_str().unwrap(),
        "--duration",
        "0.003",
        "--repeat",
        "2",
        "--np",
        "4",
        "--set",
        "transports=tcp",
    ]);
    ok(&o);
    let html = std::fs::read_to_string(dir.join("index.html")).expect("index.html");
    assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"));
    for word in [
        "Ping-pong",
        "overhead",
        "Cannon",
        "Models",
        "<table>",
        "cores",
    ] {
        assert!(html.contains(word), "no {word} in the report");
    }
    // Self-contained: inline SVG, nothing fetched.
    assert!(html.matches("<svg").count() >= 5);
    assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
    let doc = read_json(&dir.join("results.json"));
    assert!(doc["sections"].as_array().unwrap().len() >= 7);
    // The progress engine's section: Tandem under each progress policy.
    let policies = doc["sections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["title"].as_str().unwrap().starts_with("Progress engine"))
        .expect("no progress-engine section");
    assert_eq!(
        table_names(&policies["result"]),
        [
            "tandem-poll",
            "tandem-adaptive",
            "tandem-thread",
            "tandem-signal"
        ],
        "{}",
        policies["skipped"]
    );
    // By default every MPI library installed here is measured beside
    // Tandem; one missing is named with how to install it.
    let libs: Vec<&str> = doc["libraries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l[0].as_str().unwrap())
        .collect();
    assert_eq!(libs.first(), Some(&"tandem"), "{libs:?}");
    for (lib, wrapper) in [("openmpi", "mpicc.openmpi"), ("mpich", "mpicc.mpich")] {
        let installed = std::env::split_paths(&std::env::var_os("PATH").unwrap())
            .any(|d| d.join(wrapper).is_file());
        assert_eq!(libs.contains(&lib), installed, "{lib}: {libs:?}");
        if !installed {
            assert!(
                doc["not_found"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|m| m.as_str().unwrap().contains(wrapper)),
                "{lib} not found, not said: {}",
                doc["not_found"]
            );
        }
    }
    // The page opens with the summary: before any section, one line per
    // figure, each with a value for every library and a verdict that
    // names the others.
    let summary_at = html
        .find("<h2 id=\"summary\">Summary</h2>")
        .expect("no summary");
    let first_section = html.find("<h3 id=\"s0\">").expect("no section");
    assert!(summary_at < first_section);
    let figures = doc["summary"].as_array().unwrap();
    let questions: Vec<&str> = figures
        .iter()
        .map(|f| f["question"].as_str().unwrap())
        .collect();
    for q in [
        "latency",
        "bandwidth",
        "overlap",
        "application",
        "collectives",
    ] {
        assert!(questions.contains(&q), "no {q} figure: {questions:?}");
    }
    for f in figures {
        assert_eq!(f["transport"], "tcp", "{f}");
        let values = f["values"].as_array().unwrap();
        let names: Vec<&str> = values.iter().map(|v| v[0].as_str().unwrap()).collect();
        assert_eq!(names, libs, "{f}");
        for v in values {
            let median = v[1]["median"].as_f64().unwrap_or(-1.0);
            assert!(median >= 0.0 && median.is_finite(), "{f}");
        }
        let verdict = f["verdict"].as_str().unwrap();
        assert!(verdict.starts_with("TCP "), "{verdict}");
        if libs.contains(&"openmpi") {
            assert!(verdict.contains("Open MPI"), "{verdict}");
        }
        assert!(html.contains(verdict), "{verdict} not on the page");
    }
    // Plots come first, their tables folded below them.
    assert!(html.contains("<details><summary>Table: median"));
    let pingpong = html.find("<h3 id=\"s0\">").unwrap();
    let plot = html[pingpong..].find("<svg").unwrap();
    let table = html[pingpong..].find("<table>").unwrap();
    assert!(plot < table);
    // The models: measured and predicted times and each model's error as
    // plots, then the fitted parameters with units and errors in a table
    // (a row per parameter under its model's name), no monospace text.
    let models = &html[html
        .find("<h2 id=\"q-models\">")
        .expect("no models section")..];
    let params = &models[models
        .find("<table class=\"model\">")
        .expect("no parameter table in the models")..];
    let params = &params[..params.find("</table>").unwrap()];
    assert!(models.find("<svg").unwrap() < models.find("<table").unwrap());
    assert!(models.matches("<svg").count() >= 2, "no error plot");
    for word in [
        "<th>Model</th>",
        "<th>Parameter</th>",
        "<th>Largest error</th>",
        "<th>Median error</th>",
        "<b>Hockney</b>",
        "latency \u{3b1}",
        "bandwidth 1/\u{3b2}",
        "\u{b5}s</td>",
        "MB/s</td>",
        "%</td>",
    ] {
        assert!(params.contains(word), "no {word} in the parameter table");
    }
    let fitted = &doc["models"][0][1];
    if fitted["loggp"].is_object() {
        for word in [
            "<b>LogGP</b>",
            "L, latency",
            "o_s, send overhead",
            "o_r, receive overhead",
            "g, gap per message",
            "G, gap per byte",
        ] {
            assert!(params.contains(word), "no {word} in the parameter table");
        }
    }
    if fitted["piecewise"].is_object() {
        assert!(
            params.contains("<b>Hockney per protocol</b>")
                || params.contains("<b>piecewise Hockney</b>"),
            "no piecewise Hockney in the parameter table"
        );
    }
    assert!(params.contains("(best)"), "no best model marked");
    assert!(!models.contains("<pre>"), "the models as monospace text");
    assert!(models.contains("<details><summary>Table: measured and predicted per size"));
    // Without a terminal, each launch is announced on stderr, counted.
    assert!(
        o.stderr.contains("tandem bench report: [1/"),
        "{}",
        o.describe()
    );
    assert!(
        doc["transports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "tcp"),
        "{}",
        doc["transports"]
    );
    in_browser(&dir, &html);
}

/// The page in a real browser (headless Chromium, where installed): at a
/// laptop's width and a narrow one, the summary shows on the first screen,
/// every plot is drawn with a size, and nothing is wider than the window
/// (tables scroll in their own box). A screenshot is left beside the page.
fn in_browser(dir: &Path, html: &str) {
    let Some(chromium) = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            std::env::split_paths(&std::env::var_os("PATH").unwrap()).any(|d| d.join(c).is_file())
        })
    else {
        eprintln!("SKIP in_browser: no chromium on PATH (apt-get install chromium)");
        return;
    };
    // A copy of the page with a probe that writes what the browser laid
    // out into the title, which --dump-dom then shows.
    let probe = "<script>addEventListener('load',()=>{const d=document.documentElement;\
        const svgs=[...document.querySelectorAll('.plot svg')];\
        const s=document.getElementById('summary');\
        document.title='probe '+JSON.stringify({overflow:d.scrollWidth-d.clientWidth,\
        plots:svgs.length,drawn:svgs.filter(e=>e.getBoundingClientRect().width>200).length,\
        summary:s?s.getBoundingClientRect().top:-1,\
        lines:document.querySelectorAll('ul.summary li').length});});</script>";
    let probed = dir.join("probed.html");
    std::fs::write(&probed, html.replace("</body>", &format!("{probe}</body>"))).unwrap();
    let headless = |width: u32, height: u32| {
        let mut cmd = Command::new(chromium);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            &format!("--window-size={width},{height}"),
        ]);
        cmd
    };
    for width in [1280, 800] {
        let mut cmd = headless(width, 900);
        cmd.arg("--dump-dom")
            .arg(format!("file://{}", probed.display()));
        let o = run_command(cmd, Duration::from_secs(60));
        assert!(o.status.success(), "{}", o.describe());
        let at = o
            .stdout
            .find("<title>probe ")
            .expect("no probe result in the DOM")
            + 13;
        let end = o.stdout[at..].find("</title>").unwrap() + at;
        let text = o.stdout[at..end].replace("&quot;", "\"");
        let probe: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        assert_eq!(
            probe["overflow"], 0,
            "wider than a {width} px window: {probe}"
        );
        let plots = probe["plots"].as_u64().unwrap();
        assert!(plots >= 5, "{probe}");
        assert_eq!(
            probe["drawn"].as_u64(),
            Some(plots),
            "a plot not drawn: {probe}"
        );
        let top = probe["summary"].as_f64().unwrap();
        assert!((0.0..600.0).contains(&top), "summary at {top} px: {probe}");
        assert!(probe["lines"].as_u64().unwrap() >= 5, "{probe}");
    }
    let shot = dir.join("screenshot.png");
    let mut cmd = headless(1280, 1600);
    cmd.arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", dir.join("index.html").display()));
    let o = run_command(cmd, Duration::from_secs(60));
    assert!(o.status.success(), "{}", o.describe());
    let bytes = std::fs::read(&shot).expect("no screenshot");
    assert!(bytes.starts_with(b"\x89PNG"), "the screenshot is not a PNG");
}

/// The report with `--replicas 1,2`: every section compares tandem-r2
/// with tandem, and the time to solution is added.
#[test]
fn report_with_replicas() {
    let dir = out_dir("report-replicas");
    let o = bench(&[
        "report",
        "--out",
        dir.to_str().unwrap(),
        "--duration",
        "0.003",
        "--repeat",
        "2",
        "--np",
        "2",
        "--set",
        "transports=tcp",
        "--replicas",
        "1,2",
    ]);
    ok(&o);
    let html = std::fs::read_to_string(dir.join("index.html")).expect("index.html");
    for word in [
        "tandem-r2/tandem (latency)",
        "tandem-r2/tandem (total)",
        "Time to solution",
        "tandem-r2-kill/tandem (time to solution)",
        "tandem-r2-kill: 2 of 2 solves verified; 2 of 2 launches lost a replica",
    ] {
        assert!(html.contains(word), "no {word} in the report");
    }
    // The overhead kernel decides by the clock what to send, so it is not
    // replicated; the page says why.
    assert!(
        html.contains("tandem-r2 skipped for overhead: it decides from each process"),
        "no note on the overhead section"
    );
    let doc = read_json(&dir.join("results.json"));
    for s in doc["sections"].as_array().unwrap() {
        let names = table_names(&s["result"]);
        let expected: &[&str] = match s["kernel"].as_str().unwrap() {
            "overhead" => &["tandem"],
            "tts" => &["tandem", "tandem-r2", "tandem-r2-kill"],
            _ => &["tandem", "tandem-r2"],
        };
        assert_eq!(names, expected, "{}: {}", s["kernel"], s["skipped"]);
    }
}

#[test]
fn pingpong_across_rate_limited_namespaces() {
    // Two network namespaces as hosts, each link limited to 1 Gbit/s
    // (125 MB/s on the wire, Ethernet, IP and TCP headers included).
    let dir = out_dir("netns");
    let json = dir.join("r.json");
    let o = bench(&[
        "pingpong",
        "--hosts",
        "netns:2",
        "--rate",
        "1gbit",
        "--sizes",
        "8,4m",
        "--duration",
        "0.005",
        "--repeat",
        "2",
        "--json",
        json.to_str().unwrap(),
    ]);
    if !o.status.success() && o.stderr.contains("network namespaces cannot be created") {
        eprintln!(
            "SKIP pingpong_across_rate_limited_namespaces: {}",
            o.stderr.trim()
        );
        return;
    }
    ok(&o);
    assert!(
        o.stdout.contains("2 network namespaces"),
        "{}",
        o.describe()
    );
    let doc = read_json(&json);
    check_document(&doc, "pingpong", "sample", 2);
    let command = doc["runs"][0]["command"].as_str().unwrap_or("");
    assert!(
        command.starts_with("ip netns exec tnd-") && command.contains("--agent"),
        "{command}"
    );
    // The bucket lets at most one burst (125 kB, 1 ms at the rate) through
    // at line speed per message, under 3% of 4 MiB, and headers cost more
    // than that: payload bandwidth above the rate by more than 10% would
    // mean the limit was not applied.
    let rows = doc["tables"][0][1]["rows"].as_array().unwrap();
    let big = rows
        .iter()
        .find(|r| r["x"].as_f64() == Some(4194304.0))
        .unwrap_or_else(|| panic!("no 4 MiB row: {rows:?}"));
    let mbps = big["values"][1]["median"].as_f64().unwrap();
    eprintln!("4 MiB ping-pong between namespaces limited to 1gbit: {mbps:.1} MB/s");
    assert!(
        mbps > 0.0 && mbps <= 125.0 * 1.10,
        "{mbps} MB/s over links limited to 125 MB/s"
    );
    // Everything is gone: the namespaces named in the command, and no
    // process of the job is left (ok() checked).
    let ns = command.split_whitespace().nth(3).unwrap_or("");
    let base = ns.trim_end_matches("-h0");
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(
        !list.contains(base),
        "namespaces of {base} left behind:\n{list}"
    );
}

/// Replicated and unreplicated Tandem across 4 namespace hosts at 1 Gbit/s,
/// each replica of the 2 ranks on a host of its own; then the time to
/// solution there, with Open MPI beside it when it is installed.
#[test]
fn replicas_across_rate_limited_namespaces() {
    let dir = out_dir("netns-replicas");
    let json = dir.join("r.json");
    let o = bench(&[
        "pingpong",
        "--replicas",
        "1,2",
        "--hosts",
        "netns:4",
        "--rate",
        "1gbit",
        "--sizes",
        "8,64k",
        "--duration",
        "0.005",
        "--repeat",
        "2",
        "--json",
        json.to_str().unwrap(),
    ]);
    if !o.status.success() && o.stderr.contains("network namespaces cannot be created") {
        eprintln!(
            "SKIP replicas_across_rate_limited_namespaces: {}",
            o.stderr.trim()
        );
        return;
    }
    ok(&o);
    assert!(
        o.stdout.contains("4 network namespaces") && o.stdout.contains("tandem-r2/tandem"),
        "{}",
        o.describe()
    );
    let doc = read_json(&json);
    assert_eq!(table_names(&doc), ["tandem", "tandem-r2"], "{doc}");
    for r in runs_of(&doc, "tandem-r2") {
        let command = r["command"].as_str().unwrap();
        assert!(
            command.starts_with("ip netns exec tnd-") && command.contains("--replicas 2 --host "),
            "{command}"
        );
        // One slot per host: the launcher had to spread the replicas.
        assert!(command.contains("-h3:1 --agent"), "{command}");
        assert!(
            !r["launcher_notes"].to_string().contains("share host"),
            "{r}"
        );
    }

    let json = dir.join("tts.json");
    let o = bench(&[
        "tts",
        "--np",
        "2",
        "--repeat",
        "1",
        "--set",
        "steps=20",
        "--sizes",
        "4k",
        "--hosts",
        "netns:4",
        "--rate",
        "1gbit",
        "--json",
        json.to_str().unwrap(),
    ]);
    ok(&o);
    let doc = read_json(&json);
    let mut expected = vec!["tandem", "tandem-r2", "tandem-r2-kill"];
    let ompi = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("mpirun.openmpi").is_file()))
        .unwrap_or(false);
    if ompi {
        expected.push("openmpi");
        let command = runs_of(&doc, "openmpi")[0]["command"].as_str().unwrap();
        assert!(
            command.contains("ip netns exec tnd-") && command.contains("plm_rsh_agent"),
            "{command}"
        );
        // The temporary directory each host had for Open MPI's daemons is gone.
        let h0 = command
            .split_whitespace()
            .skip_while(|w| *w != "exec")
            .nth(1)
            .unwrap_or("");
        let dir = std::env::temp_dir().join(format!("tandem-netns-{h0}"));
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
    assert_eq!(table_names(&doc), expected, "{doc}");
    assert!(
        o.stdout.contains("every solve gave the result"),
        "{}",
        o.describe()
    );
    for lib in &expected {
        assert!(
            o.stdout.contains(&format!("{lib}: 1 of 1 solves verified")),
            "{lib}: {}",
            o.describe()
        );
    }
    // The replica lost was on a host of its own: the last one.
    let notes = runs_of(&doc, "tandem-r2-kill")[0]["launcher_notes"].to_string();
    assert!(
        notes.contains("rank 1 replica 1 (host tnd-") && notes.contains("-h3, pid"),
        "{notes}"
    );
}

#[test]
fn user_errors_are_explained() {
    let o = bench(&["pingpong", "--mpi", "/nonexistent/mpicc"]);
    assert!(!o.status.success());
    assert!(
        o.stderr.contains("no such compiler wrapper"),
        "{}",
        o.describe()
    );

    let o = bench(&["cannon", "--np", "3"]);
    assert!(!o.status.success());
    assert!(
        o.stderr.contains("square number of ranks"),
        "{}",
        o.describe()
    );

    // Refused before anything is measured.
    let o = bench(&["pingpong", "--plot", "/tmp/x.jpg"]);
    assert!(!o.status.success());
    assert!(o.stderr.contains(".svg or .png"), "{}", o.describe());

    for (args, needle) in [
        (vec!["--hosts", "cluster"], "expected netns:K"),
        (vec!["--rate", "1gbit"], "give --hosts netns:K"),
        (
            vec!["--hosts", "netns:2", "--rate", "fast"],
            "expected a tc rate",
        ),
    ] {
        let mut all = vec!["pingpong"];
        all.extend(args.iter());
        let o = bench(&all);
        assert!(!o.status.success(), "{args:?}");
        assert!(o.stderr.contains(needle), "{args:?}: {}", o.describe());
    }

    // MPICH is not started across namespaces (or not installed).
    let o = bench(&["pingpong", "--hosts", "netns:2", "--mpi", "tandem,mpich"]);
    assert!(!o.status.success());
    assert!(
        o.stderr.contains("Tandem and Open MPI only")
            || o.stderr.contains("MPICH is not installed"),
        "{}",
        o.describe()
    );

    for bad in ["0", "two", "1,17"] {
        let o = bench(&["pingpong", "--replicas", bad]);
        assert!(!o.status.success(), "--replicas {bad}");
        assert!(
            o.stderr.contains("expected replica counts from 1 to 16"),
            "{}",
            o.describe()
        );
    }

    let o = bench(&["overhead", "--duration", "1"]);
    assert!(!o.status.success());
    assert!(o.stderr.contains("--repeat"), "{}", o.describe());

    // Not a kernel parameter, so it goes to the library, which rejects it.
    let o = bench(&[
        "pingpong",
        "--set",
        "eager_limt=1k",
        "--sizes",
        "1",
        "--repeat",
        "1",
    ]);
    assert!(!o.status.success());
    assert!(
        o.output().contains("eager_limit"),
        "no suggestion: {}",
        o.describe()
    );
}
