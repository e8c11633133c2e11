//! A set of nodes, listed in the order they joined: the nodes a flush
//! must look at, the nodes asked to help.

pub(super) struct NodeSet {
    nodes: Vec<u32>,
    member: Vec<bool>,
}

impl NodeSet {
    /// An empty set of the nodes below `size`.
    pub(super) fn new(size: usize) -> NodeSet {
        NodeSet {
            nodes: Vec::new(),
            member: vec![false; size],
        }
    }

    pub(super) fn contains(&self, node: u32) -> bool {
        self.member[node as usize]
    }

    pub(super) fn insert(&mut self, node: u32) {
        if !self.member[node as usize] {
            self.member[node as usize] = true;
            self.nodes.push(node);
        }
    }

    /// Empties the set; its nodes.
    pub(super) fn take(&mut self) -> Vec<u32> {
        for &n in &self.nodes {
            self.member[n as usize] = false;
        }
        std::mem::take(&mut self.nodes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_come_back_once_in_the_order_they_joined() {
        let mut s = NodeSet::new(8);
        for n in [5, 2, 5, 7, 2] {
            s.insert(n);
        }
        assert!(s.contains(5) && s.contains(2) && s.contains(7));
        assert!(!s.contains(0));
        assert_eq!(s.take(), vec![5, 2, 7]);
        assert!(!s.contains(5), "taking empties the set");
        assert!(s.take().is_empty());
        s.insert(5);
        assert_eq!(s.take(), vec![5]);
    }
}
