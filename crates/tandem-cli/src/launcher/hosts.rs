//! Host lists (`--host a:4,b:4`, `--hostfile FILE`) and the placement of
//! ranks on them (`--map-by slot|node`).

use std::net::IpAddr;

/// A host and how many ranks it takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostSlots {
    pub name: String,
    pub slots: u32,
}

/// How ranks are spread over the hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapBy {
    /// Fill each host's slots before the next host (ranks 0..3 on a, ...).
    Slot,
    /// One rank per host in turn, skipping hosts whose slots are taken.
    Node,
}

impl MapBy {
    pub fn parse(text: &str) -> Result<MapBy, String> {
        match text.to_ascii_lowercase().as_str() {
            "slot" | "core" | "hwthread" => Ok(MapBy::Slot),
            "node" | "host" => Ok(MapBy::Node),
            _ => Err(format!("--map-by: expected slot or node, got '{text}'")),
        }
    }
}

fn check_name(name: &str, whence: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:[]@%".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!("{whence}: '{name}' is not a host name"))
    }
}

fn parse_slots(text: &str, whence: &str) -> Result<u32, String> {
    text.parse::<u32>()
        .ok()
        .filter(|n| (1..=65536).contains(n))
        .ok_or_else(|| format!("{whence}: '{text}' is not a slot count (1 to 65536)"))
}

/// Adds `name` with `slots`, merging repeated hosts.
fn add(list: &mut Vec<HostSlots>, name: &str, slots: u32) {
    match list.iter_mut().find(|h| h.name == name) {
        Some(h) => h.slots = h.slots.saturating_add(slots),
        None => list.push(HostSlots {
            name: name.to_string(),
            slots,
        }),
    }
}

/// Splits `name:N` (an IPv6 address in brackets keeps its colons).
fn split_slots(item: &str) -> (&str, Option<&str>) {
    if let Some(rest) = item.strip_prefix('[') {
        if let Some(end) = rest.find(']') {
            let name = &item[..end + 2];
            return match item[end + 2..].strip_prefix(':') {
                Some(n) => (name, Some(n)),
                None => (name, None),
            };
        }
    }
    if item.matches(':').count() == 1 {
        let (n, s) = item.split_once(':').unwrap_or((item, ""));
        return (n, Some(s));
    }
    (item, None)
}

/// Parses `a:4,b:4,c` (a host without a count has one slot).
pub fn parse_host_list(text: &str) -> Result<Vec<HostSlots>, String> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, slots) = split_slots(item);
        check_name(name, "--host")?;
        let slots = match slots {
            Some(s) => parse_slots(s, "--host")?,
            None => 1,
        };
        add(&mut out, name, slots);
    }
    if out.is_empty() {
        return Err("--host: no hosts given".into());
    }
    Ok(out)
}

/// Parses a host file: one host per line, with an optional slot count as
/// `name:N`, `name slots=N` (Open MPI) or `name N`; `#` starts a comment.
pub fn parse_hostfile(text: &str, path: &str) -> Result<Vec<HostSlots>, String> {
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let whence = format!("{path}:{}", n + 1);
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or_default();
        let (name, mut slots) = split_slots(first);
        check_name(name, &whence)?;
        for w in words {
            let count = w
                .strip_prefix("slots=")
                .or_else(|| w.strip_prefix("max_slots=").map(|_| ""))
                .unwrap_or(w);
            if count.is_empty() {
                continue; // max_slots: a limit, not a count
            }
            if slots.is_some() {
                return Err(format!("{whence}: more than one slot count"));
            }
            slots = Some(count);
        }
        let slots = match slots {
            Some(s) => parse_slots(s, &whence)?,
            None => 1,
        };
        add(&mut out, name, slots);
    }
    if out.is_empty() {
        return Err(format!("{path}: no hosts in the host file"));
    }
    Ok(out)
}

/// Places `ranks` ranks (all slots when `None`); returns the world ranks of
/// each host, in host order.
pub fn place(
    hosts: &[HostSlots],
    ranks: Option<u32>,
    map_by: MapBy,
) -> Result<Vec<Vec<u32>>, String> {
    let total: u64 = hosts.iter().map(|h| u64::from(h.slots)).sum();
    let n = match ranks {
        Some(n) => n,
        None => u32::try_from(total)
            .ok()
            .filter(|t| *t <= 65536)
            .ok_or_else(|| format!("the hosts have {total} slots; at most 65536 ranks"))?,
    };
    if u64::from(n) > total {
        let list: Vec<String> = hosts
            .iter()
            .map(|h| format!("{}:{}", h.name, h.slots))
            .collect();
        return Err(format!(
            "{n} ranks asked for, but the hosts have only {total} slots ({}); give more slots as host:N",
            list.join(",")
        ));
    }
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); hosts.len()];
    match map_by {
        MapBy::Slot => {
            let mut rank = 0;
            for (h, host) in hosts.iter().enumerate() {
                while rank < n && (out[h].len() as u32) < host.slots {
                    out[h].push(rank);
                    rank += 1;
                }
            }
        }
        MapBy::Node => {
            let mut rank = 0;
            while rank < n {
                for (h, host) in hosts.iter().enumerate() {
                    if rank < n && (out[h].len() as u32) < host.slots {
                        out[h].push(rank);
                        rank += 1;
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Whether `name` is this machine: `localhost`, a loopback address, this
/// host's name (short or full), or an address of one of its interfaces.
pub fn is_local(name: &str) -> bool {
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    if bare.eq_ignore_ascii_case("localhost") || bare.eq_ignore_ascii_case("localhost.localdomain")
    {
        return true;
    }
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return ip.is_loopback()
            || tandem::transport::tcp::interfaces()
                .iter()
                .any(|i| IpAddr::V4(i.addr) == ip);
    }
    let me = hostname();
    if me.is_empty() {
        return false;
    }
    let short = |s: &str| s.split('.').next().unwrap_or(s).to_ascii_lowercase();
    bare.eq_ignore_ascii_case(&me) || (!bare.contains('.') && short(bare) == short(&me))
}

/// This machine's name.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for writes of its length.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hs(v: &[(&str, u32)]) -> Vec<HostSlots> {
        v.iter()
            .map(|(n, s)| HostSlots {
                name: n.to_string(),
                slots: *s,
            })
            .collect()
    }

    #[test]
    fn host_lists() {
        assert_eq!(
            parse_host_list("a:4,b:2,c").unwrap(),
            hs(&[("a", 4), ("b", 2), ("c", 1)])
        );
        assert_eq!(parse_host_list("a,a,b").unwrap(), hs(&[("a", 2), ("b", 1)]));
        assert_eq!(parse_host_list("[::1]:3").unwrap(), hs(&[("[::1]", 3)]));
        assert!(parse_host_list("a:0").is_err());
        assert!(parse_host_list("a:x").is_err());
        assert!(parse_host_list("a b").is_err());
        assert!(parse_host_list(",").is_err());
    }

    #[test]
    fn hostfiles() {
        let text = "# cluster\nnode1 slots=4\nnode2:2   # two\n\nnode3 3\nnode4 max_slots=8\n";
        assert_eq!(
            parse_hostfile(text, "f").unwrap(),
            hs(&[("node1", 4), ("node2", 2), ("node3", 3), ("node4", 1)])
        );
        let err = parse_hostfile("a slots=x\n", "hf").unwrap_err();
        assert!(err.starts_with("hf:1:"), "{err}");
        assert!(parse_hostfile("# nothing\n", "f").is_err());
    }

    #[test]
    fn placement() {
        let h = hs(&[("a", 2), ("b", 3)]);
        assert_eq!(
            place(&h, None, MapBy::Slot).unwrap(),
            vec![vec![0, 1], vec![2, 3, 4]]
        );
        assert_eq!(
            place(&h, Some(3), MapBy::Slot).unwrap(),
            vec![vec![0, 1], vec![2]]
        );
        assert_eq!(
            place(&h, None, MapBy::Node).unwrap(),
            vec![vec![0, 2], vec![1, 3, 4]]
        );
        assert_eq!(
            place(&h, Some(3), MapBy::Node).unwrap(),
            vec![vec![0, 2], vec![1]]
        );
        let err = place(&h, Some(6), MapBy::Slot).unwrap_err();
        assert!(err.contains("only 5 slots"), "{err}");
    }

    #[test]
    fn locality() {
        assert!(is_local("localhost"));
        assert!(is_local("127.0.0.1"));
        assert!(is_local(&hostname()));
        assert!(!is_local("tandem-no-such-host-1"));
    }
}
