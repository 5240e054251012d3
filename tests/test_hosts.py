"""Hosts of real clusters as HPC users write them: Slurm host lists, host:slots
items and tables, Open MPI and MPICH hostfiles, Slurm allocations split by
network; placement that fills slots; every bad input named with its key."""
import pytest

from wanmpi import topo
from wanmpi.job import placement
from wanmpi.topo import TopologyError, hosts


@pytest.mark.parametrize("expr, names", [
    ("node[01-04]", ["node01", "node02", "node03", "node04"]),
    ("node[8-11]", ["node8", "node9", "node10", "node11"]),
    ("gpu[1-2,7],login1", ["gpu1", "gpu2", "gpu7", "login1"]),
    ("rack[1-2]-n[01-02]", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]),
    ("10.1.0.[5-7]", ["10.1.0.5", "10.1.0.6", "10.1.0.7"]),
    ("n[098-101]", ["n098", "n099", "n100", "n101"]),
    ("single", ["single"]),
])
def test_host_lists_expand_as_slurm_does(expr, names):
    assert hosts.expand(expr) == names


@pytest.mark.parametrize("expr, problem", [
    ("node[1-", "'[' without ']'"),
    ("node]1[", "']' without '['"),
    ("node[[1]]", "brackets inside brackets"),
    ("node[3-1]", "goes backwards"),
    ("node[a-b]", "must list numbers"),
    ("n1,,n2", "empty item"),
    ("node[1-70000]", "more than 65536 hosts"),
    ("bad host", "not a host name"),
    ("", "expected a host list"),
])
def test_bad_host_lists_are_named(expr, problem):
    with pytest.raises(hosts.HostError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        hosts.expand(expr)


def test_items_tables_and_slots():
    got = hosts.from_value(["a[1-2]:4", "b1",
                            {"host": "c1", "address": "10.0.0.9", "public": "3.8.1.2", "slots": 2}])
    assert got == [hosts.Host("a1", "a1", 4), hosts.Host("a2", "a2", 4), hosts.Host("b1", "b1", 1),
                   hosts.Host("c1", "10.0.0.9", 2, "3.8.1.2")]
    assert hosts.from_value("n[1-2]:3") == [hosts.Host("n1", "n1", 3), hosts.Host("n2", "n2", 3)]


def test_hostfiles_of_both_mpis(tmp_path):
    openmpi = tmp_path / "openmpi.hosts"
    openmpi.write_text("# Open MPI\nnode01 slots=4\nnode02 slots=2 max_slots=8\n\nnode03   # one slot\n")
    mpich = tmp_path / "mpich.hosts"
    mpich.write_text("node01:4\nnode02:2\nnode03\n")
    expected = [hosts.Host("node01", "node01", 4), hosts.Host("node02", "node02", 2),
                hosts.Host("node03", "node03", 1)]
    assert hosts.read_hostfile(openmpi) == expected
    assert hosts.read_hostfile(mpich) == expected


@pytest.mark.parametrize("text, problem", [
    ("node01 cpus=4\n", "hosts:1: unknown 'cpus=4'"),
    ("node01\nnode02 slots=0\n", "hosts:2: slots must be an integer from 1 to 4096, got 0"),
    ("node01:x\n", "hosts:1: slots must be"),
    ("# nothing\n", "lists no host"),
    ("no/de\n", "'no/de' is not a host name"),
])
def test_bad_hostfile_lines_are_named(tmp_path, text, problem):
    f = tmp_path / "hosts"
    f.write_text(text)
    with pytest.raises(hosts.HostError, match=problem):
        hosts.read_hostfile(f)


def two_sites(first: str, second: str = 'hosts = ["10.2.0.1"]') -> str:
    return (f'[[cluster]]\nname = "a"\nnetwork = "10.1.0.0/16"\n{first}\n'
            f'[[cluster]]\nname = "b"\nnetwork = "10.2.0.0/16"\n{second}\n')


def test_topology_takes_ranges_hostfiles_and_slurm(tmp_path):
    (tmp_path / "a.hosts").write_text("10.1.0.1 slots=2\n10.1.0.2 slots=2\n")
    path = tmp_path / "sites.toml"
    path.write_text(two_sites('hostfile = "a.hosts"', 'hosts = "10.2.0.[1-3]"'))
    t = topo.load(path)
    assert [(n.name, n.slots) for n in t.clusters[0].nodes] == [("10.1.0.1", 2), ("10.1.0.2", 2)]
    assert [n.name for n in t.clusters[1].nodes] == ["10.2.0.1", "10.2.0.2", "10.2.0.3"]
    slurm = topo.loads(two_sites("slurm = true", "slurm = true"), "s.toml",
                       environ={"SLURM_JOB_NODELIST": "10.1.0.[7-8],10.2.0.4"})
    assert [[(n.name, n.address) for n in c.nodes] for c in slurm.clusters] == [
        [("10.1.0.7", "10.1.0.7"), ("10.1.0.8", "10.1.0.8")], [("10.2.0.4", "10.2.0.4")]]


@pytest.mark.parametrize("first, environ, key, problem", [
    ('hosts = "n[2-1]"', {}, "cluster[0].hosts", "goes backwards"),
    ('hosts = ["n1:0"]', {}, "cluster[0].hosts", "slots must be"),
    ('hosts = [{ host = "n1", public = "nat" }]', {}, "cluster[0].hosts", "public 'nat' is not an IPv4"),
    ('hostfile = "missing.hosts"', {}, "cluster[0].hostfile", "cannot read hostfile"),
    ('hostfile = 3', {}, "cluster[0].hostfile", "expected the path of a hostfile"),
    ('slurm = true', {}, "cluster[0].slurm", "SLURM_JOB_NODELIST is not set"),
    ('slurm = true', {"SLURM_JOB_NODELIST": "10.9.0.1"}, "cluster[0].slurm", "no node of the allocation"),
    ('slurm = "yes"', {"SLURM_JOB_NODELIST": "10.1.0.1"}, "cluster[0].slurm", "expected true or false"),
    ('hosts = ["n1"]\nhostfile = "x"', {}, "cluster[0].hostfile", "not hosts and hostfile"),
])
def test_bad_host_sources_name_the_key(tmp_path, first, environ, key, problem):
    with pytest.raises(TopologyError) as e:
        topo.loads(two_sites(first), str(tmp_path / "bad.toml"), environ=environ)
    assert e.value.key == key and problem in e.value.problem, str(e.value)


def test_placement_fills_slots_in_order():
    t = topo.loads(two_sites('hosts = ["a1:3", "a2"]', 'hosts = ["b1:2", "b2:2"]'), "s.toml")
    block = [n.name for n in placement.placement(t, 8)]
    assert block == ["a1", "a1", "a1", "a2", "b1", "b1", "b2", "b2"]
    assert [n.name for n in placement.placement(t, 4)] == ["a1", "a1", "b1", "b2"]
    interleave = [n.name for n in placement.placement(t, 6, "interleave")]
    assert interleave == ["a1", "b1", "a1", "b1", "a1", "b2"]


# ---- --slurm: real clusters that name no hosts take the allocation's -------------------------
ALLOCATION = {"SLURM_JOB_NODELIST": "10.1.0.[7-8],10.2.0.4,10.3.0.9"}


def test_slurm_option_gives_clusters_without_hosts_the_allocation():
    t = topo.loads(two_sites("", 'hosts = ["10.2.0.1:2"]') + '[[cluster]]\nname = "c"\nnetwork = "10.3.0.0/16"\n'
                   "slurm = true\n", "s.toml", environ=ALLOCATION, slurm=True)
    assert [[(n.name, n.address, n.slots) for n in c.nodes] for c in t.clusters] == [
        [("10.1.0.7", "10.1.0.7", 1), ("10.1.0.8", "10.1.0.8", 1)],     # network only: the allocation's nodes
        [("10.2.0.1", "10.2.0.1", 2)],                                  # names its hosts: keeps them, not 10.2.0.4
        [("10.3.0.9", "10.3.0.9", 1)]]                                  # slurm = true: as without --slurm
    assert not any(n.emulated for n in t.nodes)


def test_slurm_option_when_loading_a_file(tmp_path, monkeypatch):
    path = tmp_path / "sites.toml"
    path.write_text(two_sites("", ""))
    monkeypatch.setenv("SLURM_JOB_NODELIST", "10.2.0.[1-2],10.1.0.5")
    t = topo.load(path, slurm=True)
    assert [[n.name for n in c.nodes] for c in t.clusters] == [["10.1.0.5"], ["10.2.0.1", "10.2.0.2"]]


@pytest.mark.parametrize("text, environ, slurm, key, problem", [
    (two_sites(""), ALLOCATION, False, "cluster[0].network", "a real cluster names its hosts: hosts = [...], "
     'hostfile = "FILE" or slurm = true (or, inside a Slurm allocation, `wanmpi run --slurm` takes them from it)'),
    (two_sites(""), {}, True, "cluster[0].network",
     "--slurm: SLURM_JOB_NODELIST is not set: not inside a Slurm allocation (salloc/sbatch)"),
    (two_sites(""), {"SLURM_JOB_NODELIST": ""}, True, "cluster[0].network", "SLURM_JOB_NODELIST is not set"),
    (two_sites("", ""), {"SLURM_JOB_NODELIST": "10.1.0.1"}, True, "cluster[1].network",
     "--slurm: no node of the allocation (10.1.0.1=10.1.0.1) is in 10.2.0.0/16"),
    ('[[cluster]]\nname = "a"\n[[cluster]]\nname = "b"\nnodes = 2\n', ALLOCATION, True, "",
     "--slurm takes the hosts of real clusters (each with its network = \"CIDR\") from the Slurm allocation, but "
     "this is an emulated testbed topology (nodes = N)"),
    (two_sites("nodes = 2"), ALLOCATION, True, "cluster[0].nodes", "give either nodes = N (emulated) or hosts"),
])
def test_slurm_option_errors_name_the_problem(text, environ, slurm, key, problem):
    with pytest.raises(TopologyError) as e:
        topo.loads(text, "s.toml", environ=environ, slurm=slurm)
    assert e.value.key == key and problem in e.value.problem, str(e.value)
