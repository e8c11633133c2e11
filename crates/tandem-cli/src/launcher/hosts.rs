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

/// Places `ranks` ranks of `replicas` replicas each (with `ranks` `None`:
/// as many as the slots hold R at a time); returns the processes of each
/// host, in host order. Process p is replica p / N of rank p % N.
///
/// Replica 0 of every rank goes where [`place`] puts the rank. Replica k of
/// rank r then prefers host (host of replica 0 + k) mod H and, when that
/// host is full or already runs a replica of r, the next host after it that
/// has a free slot and no replica of r; only when no such host is left does
/// it share a host with another replica of its rank. So with at least R
/// hosts and slots to spare the replicas of a rank are on R different
/// hosts. With one replica this is exactly [`place`].
pub fn place_replicas(
    hosts: &[HostSlots],
    ranks: Option<u32>,
    replicas: u32,
    map_by: MapBy,
) -> Result<Vec<Vec<u32>>, String> {
    if replicas <= 1 {
        return place(hosts, ranks, map_by);
    }
    let total: u64 = hosts.iter().map(|h| u64::from(h.slots)).sum();
    let n = match ranks {
        Some(n) => n,
        None => {
            let n = (total / u64::from(replicas)).min(65536) as u32;
            if n == 0 {
                return Err(format!(
                    "the hosts have {total} slot(s), fewer than the {replicas} replicas of one rank"
                ));
            }
            n
        }
    };
    let wanted = u64::from(n) * u64::from(replicas);
    if wanted > total {
        let list: Vec<String> = hosts
            .iter()
            .map(|h| format!("{}:{}", h.name, h.slots))
            .collect();
        return Err(format!(
            "{n} ranks x {replicas} replicas = {wanted} processes asked for, but the hosts have only {total} slots ({}); give more slots as host:N",
            list.join(",")
        ));
    }
    let first = place(hosts, Some(n), map_by)?;
    let count = hosts.len();
    let mut base = vec![0usize; n as usize];
    let mut used: Vec<u64> = vec![0; count];
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); count];
    // The hosts holding a replica of each rank so far.
    let mut holds: Vec<Vec<usize>> = vec![Vec::new(); n as usize];
    for (h, ranks) in first.iter().enumerate() {
        for &r in ranks {
            base[r as usize] = h;
            used[h] += 1;
            holds[r as usize].push(h);
            out[h].push(r);
        }
    }
    for k in 1..replicas {
        for r in 0..n {
            let ri = r as usize;
            let start = (base[ri] + k as usize) % count;
            let order = (0..count).map(|i| (start + i) % count);
            let free = |h: &usize| used[*h] < u64::from(hosts[*h].slots);
            let h = order
                .clone()
                .find(|h| free(h) && !holds[ri].contains(h))
                .or_else(|| order.clone().find(free))
                .ok_or_else(|| "internal error: no slot left for a replica".to_string())?;
            used[h] += 1;
            holds[ri].push(h);
            out[h].push(k * n + r);
        }
    }
    for list in &mut out {
        list.sort_unstable();
    }
    Ok(out)
}

/// The first rank (of `ranks`) all of whose replicas share a host, that
/// host, and how many ranks are placed so; `placed` is what
/// [`place_replicas`] returned.
pub fn shared_replicas(placed: &[Vec<u32>], ranks: u32) -> Option<(u32, usize, u32)> {
    let mut host_of: Vec<Option<usize>> = vec![None; ranks as usize];
    let mut split = vec![false; ranks as usize];
    for (h, procs) in placed.iter().enumerate() {
        for &p in procs {
            let r = (p % ranks) as usize;
            match host_of[r] {
                None => host_of[r] = Some(h),
                Some(other) if other != h => split[r] = true,
                Some(_) => {}
            }
        }
    }
    let shared: Vec<u32> = (0..ranks).filter(|&r| !split[r as usize]).collect();
    let first = *shared.first()?;
    Some((first, host_of[first as usize]?, shared.len() as u32))
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
    fn replica_placement() {
        // One replica: exactly the plain placement.
        let h = hs(&[("a", 2), ("b", 3)]);
        for map_by in [MapBy::Slot, MapBy::Node] {
            for n in [None, Some(3)] {
                assert_eq!(
                    place_replicas(&h, n, 1, map_by).unwrap(),
                    place(&h, n, map_by).unwrap()
                );
            }
        }
        // Two hosts, two replicas: each rank's replicas on both hosts.
        let h = hs(&[("a", 4), ("b", 4)]);
        let placed = place_replicas(&h, Some(4), 2, MapBy::Slot).unwrap();
        assert_eq!(placed, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
        assert_eq!(shared_replicas(&placed, 4), None);
        // By default as many ranks as the slots hold R at a time.
        let placed = place_replicas(&h, None, 2, MapBy::Node).unwrap();
        assert_eq!(placed, vec![vec![0, 2, 5, 7], vec![1, 3, 4, 6]]);
        assert_eq!(shared_replicas(&placed, 4), None);
        // Four hosts: replica 1 goes to the next host with room.
        let h = hs(&[("a", 4), ("b", 4), ("c", 4), ("d", 4)]);
        let placed = place_replicas(&h, Some(8), 2, MapBy::Slot).unwrap();
        assert_eq!(
            placed,
            vec![
                vec![0, 1, 2, 3],
                vec![4, 5, 6, 7],
                vec![8, 9, 10, 11],
                vec![12, 13, 14, 15]
            ]
        );
        // Three replicas on three hosts by node.
        let h = hs(&[("a", 2), ("b", 2), ("c", 2)]);
        let placed = place_replicas(&h, None, 3, MapBy::Node).unwrap();
        assert_eq!(shared_replicas(&placed, 2), None);
        for r in 0..2u32 {
            let hosts: Vec<usize> = (0..3)
                .filter(|&i| placed[i].iter().any(|p| p % 2 == r))
                .collect();
            assert_eq!(hosts, vec![0, 1, 2]);
        }
        // One host: every rank shares it.
        let h = hs(&[("a", 6)]);
        let placed = place_replicas(&h, Some(3), 2, MapBy::Slot).unwrap();
        assert_eq!(placed, vec![vec![0, 1, 2, 3, 4, 5]]);
        assert_eq!(shared_replicas(&placed, 3), Some((0, 0, 3)));
        // A host too small for its share: some ranks must share.
        let h = hs(&[("a", 6), ("b", 2)]);
        let placed = place_replicas(&h, Some(4), 2, MapBy::Slot).unwrap();
        assert_eq!(shared_replicas(&placed, 4), Some((2, 0, 2)));
        // Not enough slots.
        let err = place_replicas(&h, Some(5), 2, MapBy::Slot).unwrap_err();
        assert!(err.contains("10 processes"), "{err}");
        assert!(place_replicas(&hs(&[("a", 1)]), None, 2, MapBy::Slot).is_err());
    }

    #[test]
    fn locality() {
        assert!(is_local("localhost"));
        assert!(is_local("127.0.0.1"));
        assert!(is_local(&hostname()));
        assert!(!is_local("tandem-no-such-host-1"));
    }
}
