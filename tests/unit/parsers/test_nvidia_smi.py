"""Parsers of nvidia-smi output, over captured real outputs (tests/fixtures/nvidia-smi, see SOURCES.md)."""

from __future__ import annotations

import contextlib
import re

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_common import (
    NvidiaSmiParseError,
    strip_ansi,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_failure import (
    classify_nvidia_smi_failure,
    nvidia_smi_failure,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_list import parse_list_gpus
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_query import (
    QUERY_GPU_FIELDS,
    convert_query_gpu,
    is_invalid_field_error,
    parse_query_gpu,
    parse_query_gpu_csv,
    pci_bus_id_to_sysfs,
    split_query_gpu_csv,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_topo import (
    P2P_STATUS_MEANING,
    nvlink_count,
    nvml_topology_level,
    parse_topo_matrix,
    parse_topo_p2p,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_topo_cells import P2P_NVML_STATUS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import paths

FIXTURES = paths.FIXTURES / "nvidia-smi"
NEW_COLUMNS = ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]


def fixture(name: str) -> str:
    # newline="" keeps the bytes as nvidia-smi printed them.
    with open(FIXTURES / name, encoding="utf-8", newline="") as handle:
        return handle.read()


def fixtures_named(prefix: str) -> list[str]:
    return sorted(path.name for path in FIXTURES.iterdir() if path.name.startswith(prefix))


def uniform(count: int, label: str) -> list[list[str]]:
    return [["X" if i == j else label for j in range(count)] for i in range(count)]


# --------------------------------------------------------------------------------------------------
# topo -m over every fixture

B300_GPU_NIC = [
    "PXB NODE NODE NODE SYS SYS SYS SYS SYS",
    "NODE PXB NODE NODE SYS SYS SYS SYS SYS",
    "NODE NODE PXB NODE SYS SYS SYS SYS SYS",
    "NODE NODE NODE PXB SYS SYS SYS SYS SYS",
    "SYS SYS SYS SYS PXB NODE NODE NODE NODE",
    "SYS SYS SYS SYS NODE PXB NODE NODE NODE",
    "SYS SYS SYS SYS NODE NODE PXB NODE NODE",
    "SYS SYS SYS SYS NODE NODE NODE PXB NODE",
]

# sglang-project/sglang#9812 (GPU1-GPU6 as posted; GPU0 and the end of GPU7 chosen, see SOURCES.md).
MERGED_GPU_NIC = [
    "PXB NODE NODE NODE NODE NODE SYS SYS SYS SYS SYS SYS",
    "NODE NODE NODE PXB NODE NODE SYS SYS SYS SYS SYS SYS",
    "NODE NODE NODE NODE PXB NODE SYS SYS SYS SYS SYS SYS",
    "NODE NODE NODE NODE NODE PXB SYS SYS SYS SYS SYS SYS",
    "SYS SYS SYS SYS SYS SYS PXB NODE NODE NODE NODE NODE",
    "SYS SYS SYS SYS SYS SYS NODE NODE NODE PXB NODE NODE",
    "SYS SYS SYS SYS SYS SYS NODE NODE NODE NODE PXB NODE",
    "SYS SYS SYS SYS SYS SYS NODE NODE NODE NODE NODE PXB",
]

TOPO_EXPECTED = {
    "topo-m_2xRTX5090-PHB.txt": {
        "links": [["X", "PHB"], ["PHB", "X"]],
        "nics": [], "nic_links": [[], []], "columns": NEW_COLUMNS,
        "cpu_affinity": ["0-63", "0-63"], "numa_affinity": [0, 0], "gpu_numa_id": [None, None],
        "nic_legend": {}, "legend_keys": ["X", "SYS", "NODE", "PHB", "PXB", "PIX", "NV#"],
    },
    "topo-m_5gpu-NODE-PHB.txt": {
        "links": [
            ["X", "NODE", "NODE", "NODE", "NODE"],
            ["NODE", "X", "NODE", "NODE", "NODE"],
            ["NODE", "NODE", "X", "NODE", "NODE"],
            ["NODE", "NODE", "NODE", "X", "PHB"],
            ["NODE", "NODE", "NODE", "PHB", "X"],
        ],
        "nics": [], "nic_links": [[]] * 5, "columns": NEW_COLUMNS,
        "cpu_affinity": ["0-63"] * 5, "numa_affinity": [0] * 5, "gpu_numa_id": [None] * 5,
        "nic_legend": {}, "legend_keys": ["X", "SYS", "NODE", "PHB", "PXB", "PIX", "NV#"],
    },
    "topo-m_590_8xB300-NV18-nics-ansi.txt": {
        "links": [["X" if i == j else "NV18" for j in range(8)] for i in range(8)],
        "nics": [f"NIC{k}" for k in range(9)],
        "nic_links": [row.split() for row in B300_GPU_NIC],
        "columns": NEW_COLUMNS,
        "cpu_affinity": ["0-63,128-191"] * 4 + ["64-127,192-255"] * 4,
        "numa_affinity": [0, 0, 0, 0, 1, 1, 1, 1], "gpu_numa_id": [None] * 8,
        "nic_legend": {
            "NIC0": "mlx5_10", "NIC1": "mlx5_11", "NIC2": "mlx5_12", "NIC3": "mlx5_13", "NIC4": "mlx5_14",
            "NIC5": "mlx5_15", "NIC6": "mlx5_16", "NIC7": "mlx5_17", "NIC8": "mlx5_bond_0",
        },
        "legend_keys": ["X", "SYS", "NODE", "PHB", "PXB", "PIX", "NV#"],
    },
    "topo-m_2018_8gpu-PIX-PXB-mlx5.txt": {
        "links": [
            ["X", "PIX", "PXB", "PXB", "SYS", "SYS", "SYS", "SYS"],
            ["PIX", "X", "PXB", "PXB", "SYS", "SYS", "SYS", "SYS"],
            ["PXB", "PXB", "X", "PIX", "SYS", "SYS", "SYS", "SYS"],
            ["PXB", "PXB", "PIX", "X", "SYS", "SYS", "SYS", "SYS"],
            ["SYS", "SYS", "SYS", "SYS", "X", "PIX", "PXB", "PXB"],
            ["SYS", "SYS", "SYS", "SYS", "PIX", "X", "PXB", "PXB"],
            ["SYS", "SYS", "SYS", "SYS", "PXB", "PXB", "X", "PIX"],
            ["SYS", "SYS", "SYS", "SYS", "PXB", "PXB", "PIX", "X"],
        ],
        "nics": ["mlx5_0"],
        "nic_links": [["SYS"]] * 4 + [["PHB"]] * 4,
        "columns": ["CPU Affinity"],
        "cpu_affinity": ["0-13"] * 4 + ["14-27"] * 4, "numa_affinity": [None] * 8, "gpu_numa_id": [None] * 8,
        "nic_legend": {}, "legend_keys": ["X", "SYS", "NODE", "PHB", "PXB", "PIX", "NV#"],
    },
    "topo-m_2017_4xK40m-SOC-mlx4.txt": {
        "links": [
            ["X", "PHB", "SOC", "SOC"],
            ["PHB", "X", "SOC", "SOC"],
            ["SOC", "SOC", "X", "PHB"],
            ["SOC", "SOC", "PHB", "X"],
        ],
        "nics": ["mlx4_0"],
        "nic_links": [["SOC"], ["SOC"], ["PHB"], ["PHB"]],
        "columns": ["CPU Affinity"],
        "cpu_affinity": ["0-5", "0-5", "6-11", "6-11"], "numa_affinity": [None] * 4, "gpu_numa_id": [None] * 4,
        "nic_legend": {}, "legend_keys": ["X", "SOC", "PHB", "PXB", "PIX", "NV#"],
    },
    "topo-m_8xNV18-12nics_NIC4-NIC5-one-field.txt": {
        "links": uniform(8, "NV18"),
        "nics": [f"NIC{k}" for k in range(12)],
        "nic_links": [row.split() for row in MERGED_GPU_NIC],
        "columns": NEW_COLUMNS,
        "cpu_affinity": ["0-55,112-167"] * 4 + ["56-111,168-223"] * 4,
        "numa_affinity": [0, 0, 0, 0, 1, 1, 1, 1], "gpu_numa_id": [None] * 8,
        "nic_legend": {f"NIC{k}": f"mlx5_{k}" for k in range(12)},
        "legend_keys": ["X", "SYS", "NODE", "PHB", "PXB", "PIX", "NV#"],
    },
    "topo-m_2020_4xT4-pasted-spaces.txt": {
        "links": [
            ["X", "SYS", "SYS", "SYS"],
            ["SYS", "X", "NODE", "NODE"],
            ["SYS", "NODE", "X", "NODE"],
            ["SYS", "NODE", "NODE", "X"],
        ],
        "nics": [], "nic_links": [[]] * 4, "columns": ["CPU Affinity"],
        "cpu_affinity": ["0-15,32-47"] + ["16-31,48-63"] * 3, "numa_affinity": [None] * 4,
        "gpu_numa_id": [None] * 4, "nic_legend": {}, "legend_keys": [],
    },
}


# Pastes cut after some rows (real excerpts): read with cut_ok, as material is; the whole-output tests leave them out.
TOPO_CUT = {
    "topo-m_8xH20-vm-NV18-8nics_spaces_cut-after-GPU5_excerpt.txt": ["GPU6", "GPU7", *[f"NIC{k}" for k in range(8)]],
}
WHOLE_TOPO = [name for name in fixtures_named("topo-m_") if name not in TOPO_CUT]


def test_every_topo_fixture_has_expectations() -> None:
    assert sorted([*TOPO_EXPECTED, *TOPO_CUT]) == fixtures_named("topo-m_")


@pytest.mark.parametrize("name", sorted(TOPO_EXPECTED))
def test_topo_matrix_fixture(name: str) -> None:
    expected = TOPO_EXPECTED[name]
    topo = parse_topo_matrix(fixture(name))

    assert topo.gpus == [f"GPU{i}" for i in range(len(expected["links"]))]
    assert topo.links == expected["links"]
    assert topo.nics == expected["nics"]
    assert topo.nic_links == expected["nic_links"]
    assert topo.columns == expected["columns"]
    assert topo.cpu_affinity == expected["cpu_affinity"]
    assert topo.numa_affinity == expected["numa_affinity"]
    assert topo.gpu_numa_id == expected["gpu_numa_id"]
    assert topo.nic_legend == expected["nic_legend"]
    assert list(topo.legend) == expected["legend_keys"]
    assert topo.unknown_labels() == set()


def test_topo_b300_details() -> None:
    topo = parse_topo_matrix(fixture("topo-m_590_8xB300-NV18-nics-ansi.txt"))

    assert topo.link("GPU3", "GPU4") == "NV18"
    assert nvlink_count(topo.link(0, 7)) == 18
    assert topo.nic_device("NIC8") == "mlx5_bond_0"
    # NIC rows: the NIC x NIC part, diagonal X, symmetric with the GPU rows.
    assert len(topo.nic_to_nic) == 9
    assert topo.nic_to_nic[0] == ["X", "NODE", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS", "SYS"]
    assert topo.nic_to_nic[8][8] == "X"
    # The raw attribute cells, as printed, with the empty spacer cell dropped.
    assert topo.attributes[5] == {"CPU Affinity": "64-127,192-255", "NUMA Affinity": "1", "GPU NUMA ID": "N/A"}
    assert topo.legend["NV#"] == "Connection traversing a bonded set of # NVLinks"


def test_topo_old_nic_column_is_its_own_device_name() -> None:
    topo = parse_topo_matrix(fixture("topo-m_2018_8gpu-PIX-PXB-mlx5.txt"))

    assert topo.nic_device("mlx5_0") == "mlx5_0"
    assert topo.nic_to_nic == [["X"]]


def test_topo_soc_means_sys_per_its_legend() -> None:
    topo = parse_topo_matrix(fixture("topo-m_2017_4xK40m-SOC-mlx4.txt"))

    assert topo.legend["SOC"].startswith("Connection traversing PCIe as well as the SMP link between CPU sockets")
    assert topo.normalized_label(topo.link(0, 2)) == "SYS"
    assert topo.normalized_label("PHB") == "PHB"
    assert nvml_topology_level(topo.link(0, 2)) == "SYSTEM"


def test_topo_soc_with_another_meaning_is_left_alone() -> None:
    text = ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tSOC\t0-7\nGPU1\tSOC\t X \t0-7\n\n"
            "Legend:\n\n  SOC  = on-chip interconnect\n")
    topo = parse_topo_matrix(text)

    assert topo.normalized_label("SOC") == "SOC"


# Row from https://github.com/vllm-project/vllm/issues/19607: no CPU or NUMA affinity known, only the
# GPU NUMA ID; the post shows the gap as four tab stops, which is this tab layout.
EMPTY_AFFINITY = (
    "\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV12\tSYS\tPXB\t\t\t\tN/A\n"
    "GPU1\tNV12\t X \tSYS\tPXB\t\t\t\tN/A\n"
    "NIC0\tSYS\tSYS\t X \tPIX\n"
    "NIC1\tPXB\tPXB\tPIX\t X \n"
)


def test_topo_empty_affinity_cells_stay_empty() -> None:
    topo = parse_topo_matrix(EMPTY_AFFINITY)

    assert topo.cpu_affinity == [None, None]
    assert topo.numa_affinity == [None, None]
    assert topo.gpu_numa_id == [None, None]
    assert topo.attributes == [{"GPU NUMA ID": "N/A"}, {"GPU NUMA ID": "N/A"}]
    assert topo.nic_links == [["SYS", "PXB"], ["SYS", "PXB"]]


def test_topo_preamble_indent_and_missing_trailing_tabs() -> None:
    # vLLM's collect_env indents the report; nvidia-smi warns when it shows fewer NICs than it found.
    text = (
        "76 NICs found in the topology, only displaying 1 in the matrix.\n"
        "    \tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "    GPU0\t X \tNV18\tSYS\t0-103\t0\t\tN/A\n"
        "    GPU1\tNV18\t X \tSYS\t104-207\t1\t\t3\n"
        "    NIC0\tSYS\tSYS\t X\n"
    )
    topo = parse_topo_matrix(text)

    assert topo.cpu_affinity == ["0-103", "104-207"]
    assert topo.numa_affinity == [0, 1]
    assert topo.gpu_numa_id == [None, 3]
    assert topo.nic_links == [["SYS"], ["SYS"]]


def test_topo_without_the_spacer_cell_maps_values_in_order() -> None:
    text = "\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-7\t0\t2\n"
    topo = parse_topo_matrix(text)

    assert (topo.cpu_affinity, topo.numa_affinity, topo.gpu_numa_id) == (["0-7"], [0], [2])


def test_topo_unknown_labels_are_kept() -> None:
    text = fixture("topo-m_2xRTX5090-PHB.txt").replace("PHB\t X", "C2C\t X").replace("X \tPHB", "X \tC2C")
    topo = parse_topo_matrix(text)

    assert topo.links == [["X", "C2C"], ["C2C", "X"]]
    assert topo.unknown_labels() == {"C2C"}
    assert nvml_topology_level("C2C") is None


def test_topo_ansi_header_equals_plain_header() -> None:
    plain = strip_ansi(fixture("topo-m_590_8xB300-NV18-nics-ansi.txt"))

    assert "\x1b" not in plain
    assert parse_topo_matrix(plain) == parse_topo_matrix(fixture("topo-m_590_8xB300-NV18-nics-ansi.txt"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "header row whose first column is GPU0"),
        ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", "GPU0"),
        ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tPHB\t0-7\n", "Rows for GPU1 are missing"),
        ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tPHB\t0-7\nGPU1\t X \tPHB\t0-7\n", "X in its own column GPU1"),
        ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \nGPU1\tPHB\t X \t0-7\n", "2 link labels"),
        ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tPHB\t0-7\nGPU2\tPHB\t X \t0-7\n", "a row for one of GPU0, GPU1"),
        ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tPHB\t0-7\nGPU0\t X \tPHB\t0-7\n", "one row for GPU0"),
        ("\tGPU0\tNIC0\tGPU1\tCPU Affinity\n", "GPU columns followed by NIC columns"),
        # A GPU row whose GPU columns cannot be placed: an unknown word may hold one label or several.
        ("\tGPU0\tGPU1\tNIC0\tCPU Affinity\nGPU0\t X \tC2CSYS\t0-7\nGPU1\tPHB\t X \tSYS\t0-7\n"
         "NIC0\tSYS\tSYS\t X \n", r"the first 2 \(the GPU columns\) in place.*'C2CSYS' not a known label"),
    ],
)
def test_topo_garbled_structure_is_an_error(text: str, message: str) -> None:
    with pytest.raises(NvidiaSmiParseError, match=message) as caught:
        parse_topo_matrix(text)
    # Every message says what was expected, what was found and what to do.
    assert "expected" in str(caught.value)
    assert "found" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "note"),
    [
        ("\tGPU0\tCPU Affinity\nGPU0\t X \t0-7\t3\t4\n", "1 values for CPU Affinity"),
        # Space-expanded rows hide empty cells: one value for three columns cannot be placed.
        ("     GPU0   CPU Affinity   NUMA Affinity   GPU NUMA ID\nGPU0  X      N/A\n", "3 values"),
    ],
)
def test_topo_attributes_that_cannot_be_placed_are_unknown(text: str, note: str) -> None:
    topo = parse_topo_matrix(text)

    assert topo.links == [["X"]]
    assert (topo.cpu_affinity, topo.numa_affinity, topo.attributes) == ([None], [None], [{}])
    assert note in topo.notes[0]


def test_topo_nic_row_with_values_after_its_links_is_unknown() -> None:
    topo = parse_topo_matrix("\tGPU0\tNIC0\tCPU Affinity\nGPU0\t X \tSYS\t0-7\nNIC0\tSYS\t X \t0-7\n")

    assert (topo.links, topo.nic_links, topo.nic_to_nic) == ([["X"]], [["SYS"]], [[None]])
    assert "NIC0: values after the link labels (0-7)" in topo.notes[0]


# --------------------------------------------------------------------------------------------------
# topo -m with cells a lost tab merged (hosts with ten or more NICs)

MERGED = "topo-m_8xNV18-12nics_NIC4-NIC5-one-field.txt"


def _rows_only(text: str, change) -> str:
    """``change`` applied to the matrix rows, not to the header or the legends."""
    lines = text.split("\n")
    return "\n".join([lines[0], *(change(line) if line[:3] in ("GPU", "NIC") else line for line in lines[1:])])


def test_topo_cells_sharing_a_field_are_split() -> None:
    topo = parse_topo_matrix(fixture(MERGED))

    assert topo.notes[0] == "GPU0: cells without a tab between them ('NODE NODE') split into their labels"
    assert "GPU2: cells without a tab between them ('PXB  NODE')" in topo.notes[2]
    assert topo.nic_to_nic[4][4:6] == ["X", "NODE"]
    assert topo.nic_to_nic[5][4:6] == ["NODE", "X"]


@pytest.mark.parametrize("variant", ["glued", "expanded", "header glued", "attribute glued", "crlf", "qp", "mpirun"])
def test_topo_merged_variants_read_the_same(variant: str) -> None:
    import re

    text = fixture(MERGED)
    if variant == "glued":
        # No separator at all: PXBNODE, NODENODE, SYSSYS.
        text = _rows_only(text, lambda line: re.sub(r"(?<=[A-Z]) +(?=[A-Z])", "", line))
    elif variant == "expanded":
        text = text.expandtabs(8)
    elif variant == "header glued":
        text = text.replace("NIC4\tNIC5", "NIC4NIC5", 1).replace("NIC10\tNIC11\t", "NIC10 NIC11", 1)
    elif variant == "attribute glued":
        text = _rows_only(text, lambda line: line.replace("SYS\t0-55", "SYS0-55").replace("PXB\t56-", "PXB56-"))
    elif variant == "crlf":
        text = text.replace("\n", "\r\n")
    elif variant == "mpirun":
        text = "\n".join(f"[1,0]<stdout>:{line}" for line in text.split("\n"))
    else:
        # An e-mail body: long lines soft-wrapped at 76 characters, every "=" written =3D.
        text = "\n".join(
            "=\n".join(line[i:i + 75] for i in range(0, max(len(line), 1), 75))
            for line in text.replace("=", "=3D").split("\n"))
    expected = parse_topo_matrix(fixture(MERGED))
    topo = parse_topo_matrix(text)

    assert (topo.gpus, topo.nics, topo.columns) == (expected.gpus, expected.nics, expected.columns)
    assert topo.links == expected.links
    assert topo.nic_links == expected.nic_links
    assert topo.nic_to_nic == expected.nic_to_nic
    assert (topo.cpu_affinity, topo.numa_affinity) == (expected.cpu_affinity, expected.numa_affinity)
    assert topo.legend == expected.legend


def test_topo_nic_cells_that_cannot_be_placed_are_unknown() -> None:
    # An unknown word glued to a label: C2CNODE could be one label or two; the GPU columns come before it.
    text = _rows_only(fixture(MERGED), lambda line: line.replace("NODE NODE", "C2CNODE", 1)
                      if line.startswith("GPU1\t") else line)
    topo = parse_topo_matrix(text)

    assert topo.links == uniform(8, "NV18")
    assert topo.nic_links[1] == ["NODE", "NODE", "NODE", "PXB"] + [None] * 8
    assert topo.nic_links[0] == MERGED_GPU_NIC[0].split()
    assert topo.cpu_affinity[1] == "0-55,112-167"
    assert "GPU1: 19 link labels for 20 columns; 'C2CNODE' not a known label; the cells for NIC4, NIC5, NIC6, " \
        "NIC7, NIC8, NIC9, NIC10, NIC11 are unknown" in topo.notes
    assert topo.unknown_labels() == set()


def test_topo_repaired_gpu_block_must_mirror() -> None:
    # GPU1's row lost a GPU label and gained none: the split reads 7 GPU labels and a shifted block.
    text = _rows_only(fixture(MERGED), lambda line: line.replace("NV18\t X \tNV18", " X \tNV18", 1)
                      if line.startswith("GPU1\t") else line)
    with pytest.raises(NvidiaSmiParseError, match="GPU1") as caught:
        parse_topo_matrix(text)
    assert "terminal" not in str(caught.value)
    assert "found" in str(caught.value)


def test_topo_truncated_fixture_names_the_missing_rows() -> None:
    text = fixture("topo-m_590_8xB300-NV18-nics-ansi.txt")
    cut = text[: text.index("\nGPU6\t") + 1]

    with pytest.raises(NvidiaSmiParseError, match=r"Rows for GPU6, GPU7, NIC0.*cut short"):
        parse_topo_matrix(cut)
    # Material reads the rows it holds and says which are missing.
    read = parse_topo_matrix(cut, cut_ok=True)
    assert read.missing_rows == ["GPU6", "GPU7", *[f"NIC{k}" for k in range(9)]]
    assert read.links[:6] == parse_topo_matrix(text).links[:6] and read.links[6] == [None] * 8


def test_a_real_guests_topo_cut_after_six_rows_gives_its_cells() -> None:
    # NVIDIA/nccl-tests#321: an H20 guest given its host's topology; the paste stops inside GPU6's row (left out).
    name = "topo-m_8xH20-vm-NV18-8nics_spaces_cut-after-GPU5_excerpt.txt"
    with pytest.raises(NvidiaSmiParseError, match="cut short"):
        parse_topo_matrix(fixture(name))
    topo = parse_topo_matrix(fixture(name), cut_ok=True)
    assert topo.gpus == [f"GPU{i}" for i in range(8)] and topo.nics == [f"NIC{k}" for k in range(8)]
    assert topo.missing_rows == TOPO_CUT[name]
    assert topo.links[0] == ["X", *["NV18"] * 7] and topo.links[5][5] == "X" and topo.links[7] == [None] * 8
    assert topo.nic_links[0] == ["SYS"] * 4 + ["NODE"] * 3 + ["PIX"] and topo.nic_links[5][2] == "PIX"
    assert topo.cpu_affinity == ["0-63"] * 4 + ["64-127"] * 2 + [None] * 2
    assert topo.numa_affinity == [0] * 4 + [1] * 2 + [None] * 2
    assert topo.gpu_numa_id == [None] * 8
    # The paste as posted, stopping inside GPU6's row: its GPU block is whole and read; the NIC cells after the cut
    # are unknown, never completed ("PI" is not taken for PIX), and the notes say so.
    partial_row = "GPU6    NV18    NV18    NV18    NV18    NV18    NV18     X      NV18    NODE    PI\n"
    with_row = parse_topo_matrix(fixture(name) + partial_row, cut_ok=True)
    assert with_row.links[6] == [*["NV18"] * 6, "X", "NV18"] and with_row.nic_links[6] == ["NODE", *[None] * 7]
    assert with_row.missing_rows == TOPO_CUT[name][1:] and with_row.links[:6] == topo.links[:6]
    assert any("'PI' not a known label" in note for note in with_row.notes)


def test_topo_refuses_p2p_output() -> None:
    with pytest.raises(NvidiaSmiParseError, match="parse_topo_p2p"):
        parse_topo_matrix(fixture("topo-p2p_2xRTX5090-GNS.txt"))


def test_link_helpers() -> None:
    assert nvlink_count("NV4") == 4
    assert nvlink_count("NV18") == 18
    assert nvlink_count("NODE") is None
    assert nvlink_count("NV") is None
    assert [nvml_topology_level(label) for label in ("X", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC", "NV18")] == [
        "INTERNAL", "SINGLE", "MULTIPLE", "HOSTBRIDGE", "NODE", "SYSTEM", "SYSTEM", None,
    ]


# --------------------------------------------------------------------------------------------------
# topo -p2p over every fixture

P2P_EXPECTED = {
    "topo-p2p_2xRTX5090-GNS.txt": (2, "GNS"),
    "topo-p2p-p_5gpu-OK.txt": (5, "OK"),
    "topo-p2p-r_2gpu-NS.txt": (2, "NS"),
    "topo-p2p-r_8gpu-vm-NS.txt": (8, "NS"),
    "topo-p2p-r_595_2xRTX3090-CNS.txt": (2, "CNS"),
    # A real guest's matrix with every GPU in one P2P clique (cloud-hypervisor docs/vfio.md): no legend after it.
    "topo-p2p-r_8gpu-cloud-hypervisor-guest-clique-OK_no-legend.txt": (8, "OK"),
}


def test_every_p2p_fixture_has_expectations() -> None:
    assert sorted(P2P_EXPECTED) == fixtures_named("topo-p2p")


@pytest.mark.parametrize("name", sorted(P2P_EXPECTED))
def test_p2p_fixture(name: str) -> None:
    count, code = P2P_EXPECTED[name]
    p2p = parse_topo_p2p(fixture(name))

    assert p2p.gpus == [f"GPU{i}" for i in range(count)]
    assert p2p.status == uniform(count, code)
    assert p2p.codes() == {code}
    assert len(p2p.pairs()) == count * (count - 1)
    assert p2p.all_ok() is (code == "OK")
    assert len(p2p.not_ok()) == (0 if code == "OK" else count * (count - 1))
    assert p2p.legend == ({} if "no-legend" in name else {
        "X": "Self", "OK": "Status Ok", "CNS": "Chipset not supported", "GNS": "GPU not supported",
        "TNS": "Topology not supported", "NS": "Not supported", "DR": "Disabled by regkey", "U": "Unknown",
    })
    assert p2p.unknown_codes() == set()


def test_p2p_vm_ns_names_every_pair() -> None:
    p2p = parse_topo_p2p(fixture("topo-p2p-r_8gpu-vm-NS.txt"))

    assert p2p.pair("GPU0", "GPU7") == "NS"
    assert p2p.pair(3, 3) == "X"
    assert ("GPU7", "GPU0", "NS") in p2p.not_ok()
    assert P2P_NVML_STATUS["NS"] == "NVML_P2P_STATUS_NOT_SUPPORTED"
    assert P2P_STATUS_MEANING["NS"] == "not supported"


def test_p2p_mixed_and_unknown_codes() -> None:
    text = " \tGPU0\tGPU1\tGPU2\t\n GPU0\tX\tOK\tZZ\t\n GPU1\tOK\tX\tTNS\t\n GPU2\tDR\tU\tX\t\n"
    p2p = parse_topo_p2p(text)

    assert p2p.status == [["X", "OK", "ZZ"], ["OK", "X", "TNS"], ["DR", "U", "X"]]
    assert p2p.unknown_codes() == {"ZZ"}
    assert p2p.not_ok() == [("GPU0", "GPU2", "ZZ"), ("GPU1", "GPU2", "TNS"), ("GPU2", "GPU0", "DR"),
                            ("GPU2", "GPU1", "U")]
    assert p2p.legend == {}


def test_p2p_ansi_header() -> None:
    text = " \t\x1b[4mGPU0\tGPU1\t\x1b[0m\n GPU0\tX\tOK\t\n GPU1\tOK\tX\t\n"

    assert parse_topo_p2p(text).status == [["X", "OK"], ["OK", "X"]]


def test_p2p_space_expanded_copy() -> None:
    # As posted in https://github.com/noonghunna/club-3090/issues/1130.
    text = "        GPU0    GPU1\n GPU0   X       GNS\n GPU1   GNS     X\n"

    assert parse_topo_p2p(text).status == uniform(2, "GNS")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "GPU0"),
        ("No devices were found", "GPU0"),
        (" \tGPU0\tGPU1\t\n GPU0\tX\tOK\t\n", "Rows for GPU1 are missing"),
        (" \tGPU0\tGPU1\t\n GPU0\tX\tOK\tOK\t\n GPU1\tOK\tX\t\n", "2 codes"),
        (" \tGPU0\tGPU1\t\n GPU0\tOK\tX\t\n GPU1\tOK\tX\t\n", "X in column GPU0"),
        (" \tGPU0\tGPU1\t\n GPU0\tX\tOK\t\n GPU5\tOK\tX\t\n", "one row for each"),
    ],
)
def test_p2p_garbled_structure_is_an_error(text: str, message: str) -> None:
    with pytest.raises(NvidiaSmiParseError, match=message):
        parse_topo_p2p(text)


def test_p2p_refuses_topo_output() -> None:
    with pytest.raises(NvidiaSmiParseError, match="only GPU columns"):
        parse_topo_p2p(fixture("topo-m_2xRTX5090-PHB.txt"))


# --------------------------------------------------------------------------------------------------
# nvidia-smi -L

LIST_EXPECTED = {
    "list-gpus_535_A100-80GB-MIG-7x1g.10gb.txt": [
        (0, "NVIDIA A100-SXM4-80GB", "GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16", ["1g.10gb"] * 7),
    ],
    "list-gpus_4xA100-80GB-MIG-on-GPU0.txt": [
        (0, "NVIDIA A100-SXM4-80GB", "GPU-513536b6-7d19-9063-b049-1e69664bb298", ["1g.20gb"] * 4),
        (1, "NVIDIA A100-SXM4-80GB", "GPU-d8594bd4-0fc3-8595-e355-7c98138f3b95", []),
        (2, "NVIDIA A100-SXM4-80GB", "GPU-5e375e7e-b41f-155b-dcdc-534524c356fc", []),
        (3, "NVIDIA A100-SXM4-80GB", "GPU-69ec2344-ebac-b028-f88f-452abb3d7f11", []),
    ],
    "list-gpus_570_TITAN-V_RTX-5880-Ada.txt": [
        (0, "NVIDIA TITAN V", "GPU-b5169cef-2205-c30e-f2b3-220cfa14bafd", []),
        (1, "NVIDIA RTX 5880 Ada Generation", "GPU-7518f6b0-991f-ce2b-3d37-c779130d3137", []),
    ],
}


def test_every_list_fixture_has_expectations() -> None:
    assert sorted(LIST_EXPECTED) == fixtures_named("list-gpus_")


@pytest.mark.parametrize("name", sorted(LIST_EXPECTED))
def test_list_gpus_fixture(name: str) -> None:
    gpus = parse_list_gpus(fixture(name))

    assert [(gpu.index, gpu.name, gpu.uuid, [mig.profile for mig in gpu.mig_devices]) for gpu in gpus] == (
        LIST_EXPECTED[name])
    for gpu in gpus:
        assert [mig.device for mig in gpu.mig_devices] == list(range(len(gpu.mig_devices)))
        assert all(mig.uuid.startswith("MIG-") for mig in gpu.mig_devices)


def test_list_gpus_mig_uuid_and_old_forms() -> None:
    gpus = parse_list_gpus(fixture("list-gpus_535_A100-80GB-MIG-7x1g.10gb.txt"))
    assert gpus[0].mig_devices[6].uuid == "MIG-1aae4990-b962-574e-8375-119d6d9b9687"

    # R450 named MIG devices after their GPU, with slashes; a line may lack the UUID part.
    old = ("GPU 0: A100-SXM4-40GB (UUID: GPU-5d5ba0d6)\n"
           "  MIG 3g.20gb Device 0: (UUID: MIG-GPU-5d5ba0d6/1/0)\n"
           "GPU 1: Tesla K80\n")
    listed = parse_list_gpus(old)
    assert listed[0].mig_devices[0].uuid == "MIG-GPU-5d5ba0d6/1/0"
    assert (listed[1].name, listed[1].uuid) == ("Tesla K80", None)
    assert parse_list_gpus("") == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("No devices were found\n", "no_devices"),
        ("  MIG 1g.10gb     Device  0: (UUID: MIG-feb88891)\n", "indented MIG lines"),
        ("GPU 0: A (UUID: GPU-1)\nGPU 0: A (UUID: GPU-1)\n", "GPU 0 listed once"),
        ("Failed to initialize NVML: Driver/library version mismatch\n", "version_mismatch"),
    ],
)
def test_list_gpus_errors(text: str, message: str) -> None:
    with pytest.raises(NvidiaSmiParseError, match=message):
        parse_list_gpus(text)


# --------------------------------------------------------------------------------------------------
# --query-gpu

def test_query_gpu_fixture_with_header_compute_cap() -> None:
    fields = ["compute_cap", "compute_mode", "driver_version", "name", "index"]
    text = fixture("query-gpu_570_compute_cap,compute_mode,driver_version,name,index.csv")

    assert split_query_gpu_csv(text, fields) == [
        {"compute_cap": "7.0", "compute_mode": "Default", "driver_version": "570.86.15", "name": "NVIDIA TITAN V",
         "index": "0"},
        {"compute_cap": "8.9", "compute_mode": "Default", "driver_version": "570.86.15",
         "name": "NVIDIA RTX 5880 Ada Generation", "index": "1"},
    ]
    assert parse_query_gpu_csv(text, fields) == [
        {"compute_cap": "7.0", "compute_mode": "Default", "driver_version": "570.86.15", "name": "NVIDIA TITAN V",
         "index": 0},
        {"compute_cap": "8.9", "compute_mode": "Default", "driver_version": "570.86.15",
         "name": "NVIDIA RTX 5880 Ada Generation", "index": 1},
    ]
    typed = parse_query_gpu(text, fields)
    summary = [(gpu["index"], gpu["compute_cap_major"], gpu["compute_cap_minor"], gpu["driver_branch"])
               for gpu in typed]
    assert summary == [(0, 7, 0, 570), (1, 8, 9, 570)]
    assert typed[1]["compute_mode"] == "Default"


def test_query_gpu_fixture_mig_modes() -> None:
    fields = ["uuid", "mig.mode.current", "mig.mode.pending"]
    text = fixture("query-gpu_uuid,mig.mode.current,mig.mode.pending.csv")

    assert parse_query_gpu_csv(text, fields)[0] == {
        "uuid": "GPU-ec845691-fb46-e16d-abfb-b135308cb39f", "mig.mode.current": True, "mig.mode.pending": True}
    assert [(gpu["uuid"], gpu["mig_mode"], gpu["mig_mode_pending"]) for gpu in parse_query_gpu(text, fields)] == [
        ("GPU-ec845691-fb46-e16d-abfb-b135308cb39f", True, True),
        ("GPU-91672fbd-4bc1-0434-a653-77a9501c84de", False, False),
        ("GPU-b4199570-ed3c-2a6b-646a-af77be93eac5", False, False),
        ("GPU-1a4dff29-ab6d-9f64-f125-8b7cebdaac4a", False, False),
    ]


def test_query_gpu_invalid_field_fixture() -> None:
    text = fixture("query-gpu_470_compute_cap-not-a-valid-field.txt")

    assert is_invalid_field_error(text) == "compute_cap"
    assert nvidia_smi_failure(2, "", text) == 'invalid_field: Field "compute_cap" is not a valid field to query.'
    with pytest.raises(NvidiaSmiParseError, match="does not know the field 'compute_cap'"):
        parse_query_gpu_csv(text, QUERY_GPU_FIELDS)


# Lines in the audit's own field order, with values in the forms the reports in SOURCES.md show:
# a datacenter GPU (H100 as in NVIDIA/nccl#1264: bus 18, 81559 MiB, driver 550.54.15) and a consumer
# one whose ECC and MIG modes are not available.
AUDIT_CSV = (
    "0, NVIDIA H100 80GB HBM3, GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16, 00000000:18:00.0, 9.0, 81559, "
    "550.54.15, 5, 5, 16, 16, Disabled, Enabled, Disabled\n"
    "1, NVIDIA GeForce RTX 5090, GPU-b5169cef-2205-c30e-f2b3-220cfa14bafd, 00000000:C1:00.0, 12.0, 32607, "
    "575.57.08, 1, 5, 16, 16, Enabled, [N/A], [N/A]\n"
)


def test_query_gpu_audit_fields_by_field_name() -> None:
    first, second = parse_query_gpu_csv(AUDIT_CSV, QUERY_GPU_FIELDS)

    assert first == {
        "index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16",
        "pci.bus_id": "00000000:18:00.0", "compute_cap": "9.0", "memory.total": 81559, "driver_version": "550.54.15",
        "pcie.link.gen.current": 5, "pcie.link.gen.max": 5, "pcie.link.width.current": 16,
        "pcie.link.width.max": 16, "persistence_mode": False, "ecc.mode.current": True, "mig.mode.current": False,
    }
    assert (second["compute_cap"], second["pcie.link.gen.current"], second["persistence_mode"]) == ("12.0", 1, True)
    assert (second["ecc.mode.current"], second["mig.mode.current"]) == (None, None)


def test_query_gpu_audit_fields_typed() -> None:
    first, second = parse_query_gpu(AUDIT_CSV)

    assert first == {
        "unavailable": {},
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16",
        "pci_bus_id": "00000000:18:00.0",
        "pci_address": "0000:18:00.0",
        "compute_cap": "9.0",
        "compute_cap_major": 9,
        "compute_cap_minor": 0,
        "memory_total_mib": 81559,
        "memory_total_bytes": 81559 * 1024 * 1024,
        "driver_version": "550.54.15",
        "driver_branch": 550,
        "pcie_link_gen_current": 5,
        "pcie_link_gen_max": 5,
        "pcie_link_width_current": 16,
        "pcie_link_width_max": 16,
        "persistence_mode": False,
        "ecc_mode": True,
        "mig_mode": False,
    }
    assert second["pci_address"] == "0000:c1:00.0"
    assert (second["compute_cap_major"], second["compute_cap_minor"]) == (12, 0)
    assert second["pcie_link_gen_current"] == 1
    assert (second["ecc_mode"], second["mig_mode"], second["persistence_mode"]) == (None, None, True)
    assert second["unavailable"] == {"ecc.mode.current": "[N/A]", "mig.mode.current": "[N/A]"}
    # Rows that come typed give the same facts, without the text of what was unavailable.
    retyped = convert_query_gpu(parse_query_gpu_csv(AUDIT_CSV, QUERY_GPU_FIELDS)[1])
    assert retyped == {**second, "unavailable": {"ecc.mode.current": None, "mig.mode.current": None}}


def test_query_gpu_unavailable_markers_and_units() -> None:
    row = {"memory.total": "24564 MiB", "compute_cap": "[Not Supported]", "pcie.link.gen.current": "[Unknown Error]",
           "driver_version": "N/A", "fan.speed": "[N/A]", "power.draw": "88.5"}
    typed = convert_query_gpu(row)

    assert typed["memory_total_mib"] == 24564
    assert (typed["compute_cap"], typed["compute_cap_major"], typed["compute_cap_minor"]) == (None, None, None)
    assert typed["pcie_link_gen_current"] is None
    assert (typed["driver_version"], typed["driver_branch"]) == (None, None)
    assert typed["fan_speed"] is None
    assert typed["power_draw"] == "88.5"
    assert typed["unavailable"] == {"compute_cap": "[Not Supported]", "pcie.link.gen.current": "[Unknown Error]",
                                    "driver_version": "N/A", "fan.speed": "[N/A]"}


@pytest.mark.parametrize(
    ("text", "fields", "message"),
    [
        ("0, NVIDIA H100\n1\n", ["index", "name"], "line 2: expected 2 comma-separated values"),
        ("0, a, b\n", ["index", "name"], "line 1: expected 2"),
        ("No devices were found\n", ["index"], "no_devices"),
        ("Unable to determine the device handle for GPU0000:41:00.0: Unknown Error\n", ["index", "name"],
         "device_handle_error"),
        ("0\n", [], "queried field names"),
        ("zero, A\n", ["index", "name"], "GPU row 1 field index: expected a whole number"),
        ("0, A, beta\n", ["index", "name", "driver_version"], "GPU row 1 field driver_version: expected a dotted"),
    ],
)
def test_query_gpu_csv_errors(text: str, fields: list[str], message: str) -> None:
    with pytest.raises(NvidiaSmiParseError, match=message):
        parse_query_gpu_csv(text, fields)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"index": "zero"}, "field index: expected a whole number"),
        ({"persistence_mode": "Maybe"}, "expected Enabled or Disabled"),
        ({"compute_cap": "sm_90"}, "dotted version"),
        ({"memory.total": "80 GiB"}, "whole number"),
    ],
)
def test_query_gpu_typed_errors(row: dict[str, str], message: str) -> None:
    with pytest.raises(NvidiaSmiParseError, match=message):
        convert_query_gpu(row)


def test_pci_bus_id_to_sysfs() -> None:
    assert pci_bus_id_to_sysfs("00000000:C1:00.0") == "0000:c1:00.0"
    assert pci_bus_id_to_sysfs("0001:4B:00.1") == "0001:4b:00.1"
    assert pci_bus_id_to_sysfs("GPU-1234") is None


def test_is_invalid_field_error_negative() -> None:
    assert is_invalid_field_error("0, NVIDIA H100 80GB HBM3") is None
    assert is_invalid_field_error('Field "id" is not a valid field to query.') == "id"


# --------------------------------------------------------------------------------------------------
# Failures (messages from the reports listed in SOURCES.md)

@pytest.mark.parametrize(
    ("rc", "stdout", "stderr", "expected"),
    [
        (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
            "latest NVIDIA driver is installed and running.\n", "",
         "driver_not_loaded: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
         "Make sure that the latest NVIDIA driver is installed and running."),
        (9, "NVIDIA-SMI has failed because it couldn\u2018t communicate with the NVIDIA driver.\n"
            "Make sure that the latest NVIDIA driver is installed and running.\n", "",
         "driver_not_loaded: NVIDIA-SMI has failed because it couldn\u2018t communicate with the NVIDIA driver."),
        (6, "No devices were found\n", "", "no_devices: No devices were found"),
        (18, "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 570.124\n", "",
         "version_mismatch: Failed to initialize NVML: Driver/library version mismatch NVML library version: 570.124"),
        (255, "Failed to initialize NVML: Unknown Error\n", "",
         "nvml_init_failed: Failed to initialize NVML: Unknown Error"),
        (15, "Unable to determine the device handle for GPU0000:65:00.0: Unknown Error\n", "",
         "device_handle_error: Unable to determine the device handle for GPU0000:65:00.0: Unknown Error"),
        (15, "Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost.  Reboot the system to "
             "recover this GPU\n", "",
         "gpu_lost: Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost. Reboot the system "
         "to recover this GPU"),
        (2, "", 'Field "compute_cap" is not a valid field to query.\n',
         'invalid_field: Field "compute_cap" is not a valid field to query.'),
        (None, "", "nvidia-smi: command not found", "not_installed: nvidia-smi: command not found"),
        (124, "", "nvidia-smi topo -m: no answer within 30 s", "timeout: nvidia-smi topo -m: no answer within 30 s"),
        (3, "", "\x1b[31msomething odd\x1b[0m\n", "failed: exit status 3: something odd"),
        (1, "", "", "failed: exit status 1: no message"),
    ],
)
def test_failure_classification(rc: int | None, stdout: str, stderr: str, expected: str) -> None:
    assert nvidia_smi_failure(rc, stdout, stderr) == expected


def test_failure_gpu_lost_beats_device_handle_and_gives_remedy() -> None:
    failure = classify_nvidia_smi_failure(
        0, "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n",
        "Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost.  Reboot the system to recover")

    # A lost GPU is reported even when nvidia-smi exits 0 for the others.
    assert failure is not None
    assert failure.kind == "gpu_lost"
    assert "Xid 79" in failure.remedy


@pytest.mark.parametrize("name", fixtures_named("topo-") + fixtures_named("list-gpus_") + fixtures_named("query-gpu_5"))
def test_successful_outputs_are_not_failures(name: str) -> None:
    assert nvidia_smi_failure(0, fixture(name), "") is None


# --------------------------------------------------------------------------------------------------
# Properties: no input makes a parser raise anything but NvidiaSmiParseError

PARSERS = {
    "topo": parse_topo_matrix,
    "p2p": parse_topo_p2p,
    "list": parse_list_gpus,
    "query": lambda text: parse_query_gpu(text, QUERY_GPU_FIELDS),
    "query-typed": lambda text: parse_query_gpu_csv(text, QUERY_GPU_FIELDS),
    "query-csv": lambda text: split_query_gpu_csv(text, ["index", "name"]),
}
# q_* are nvidia-smi -q outputs, read by nvidia_smi_q and tested in test_nvidia_smi_q.py.
ALL_FIXTURES = sorted(path.name for path in FIXTURES.iterdir()
                      if path.name != "SOURCES.md" and not path.name.startswith("q_"))
PROPERTY_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Text that looks like nvidia-smi output: its words, separators and escapes, in any order.
_TOKENS = st.sampled_from([
    "GPU0", "GPU1", "GPU2", "NIC0", "mlx5_0", " X ", "X", "NV18", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC",
    "OK", "NS", "CNS", "GNS", "N/A", "[N/A]", "0-63", "0", "1", "12.0", "CPU Affinity", "NUMA Affinity",
    "GPU NUMA ID", "Legend:", "NIC Legend:", "  NIC0: mlx5_0", "  X    = Self", "GPU 0: A (UUID: GPU-1)",
    "  MIG 1g.10gb     Device  0: (UUID: MIG-1)", "Enabled", "Disabled", "99999999999999999999999",
    "\t", "\n", " ", ", ", "\x1b[4m", "\x1b[0m", "\x1b", "\r", "\x00",
])
NVIDIA_LIKE_TEXT = st.lists(_TOKENS, max_size=60).map("".join)
ANSI = st.sampled_from(["\x1b[4m", "\x1b[0m", "\x1b[1;31m", "\x1b[K", "\x1b]0;title\x07", "\x1b(B"])


def _only_own_errors(parse, text: str) -> None:
    with contextlib.suppress(NvidiaSmiParseError):
        parse(text)


@PROPERTY_SETTINGS
@given(parser=st.sampled_from(sorted(PARSERS)), text=st.one_of(st.text(), NVIDIA_LIKE_TEXT))
def test_property_arbitrary_text(parser: str, text: str) -> None:
    _only_own_errors(PARSERS[parser], text)


@PROPERTY_SETTINGS
@given(name=st.sampled_from(ALL_FIXTURES), parser=st.sampled_from(sorted(PARSERS)), data=st.data())
def test_property_truncated_fixtures(name: str, parser: str, data: st.DataObject) -> None:
    text = fixture(name)
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    _only_own_errors(PARSERS[parser], text[:cut])
    _only_own_errors(PARSERS[parser], text[cut:])


def _parser_for(name: str):
    if name.startswith("topo-m"):
        return lambda text: parse_topo_matrix(text, cut_ok=name in TOPO_CUT)
    if name.startswith("topo-p2p"):
        return parse_topo_p2p
    if name.startswith("list-gpus"):
        return parse_list_gpus
    header = fixture(name).split("\n", 1)[0]
    return lambda text: parse_query_gpu_csv(text, [field.strip() for field in header.split(",")])


PARSED_FIXTURES = [name for name in ALL_FIXTURES if not name.endswith(".txt") or not name.startswith("query-gpu")]


@PROPERTY_SETTINGS
@given(name=st.sampled_from(PARSED_FIXTURES), data=st.data())
def test_property_ansi_anywhere_changes_nothing(name: str, data: st.DataObject) -> None:
    # Escapes inserted at any offset of the escape-free text are removed whole, so the result is the same.
    base = strip_ansi(fixture(name))
    positions = data.draw(st.lists(st.integers(min_value=0, max_value=len(base)), min_size=1, max_size=8))
    text = base
    # From the end, so that each offset still points into the escape-free text.
    for position in sorted(positions, reverse=True):
        text = text[:position] + data.draw(ANSI) + text[position:]
    parse = _parser_for(name)

    assert parse(text) == parse(base)


@PROPERTY_SETTINGS
@given(name=st.sampled_from(ALL_FIXTURES), data=st.data())
def test_property_extra_cells(name: str, data: st.DataObject) -> None:
    lines = fixture(name).split("\n")
    row = data.draw(st.integers(min_value=0, max_value=len(lines) - 1))
    cells = lines[row].split("\t")
    at = data.draw(st.integers(min_value=0, max_value=len(cells)))
    cells.insert(at, data.draw(st.sampled_from(["", "SYS", "NV4", "0-7", "N/A", "EXTRA COL"])))
    lines[row] = "\t".join(cells)
    _only_own_errors(_parser_for(name), "\n".join(lines))


def _row_of(lines: list[str], label: str) -> int:
    """The matrix row of a device: the line after the header (which starts with GPU0 too)."""
    header = next(number for number, line in enumerate(lines) if line.split()[:1] == ["GPU0"])
    return next(number for number, line in enumerate(lines) if number > header and line.split()[:1] == [label])


TOPO_LINK_CELLS = st.from_regex(r"[A-Z][A-Z0-9#]{0,5}", fullmatch=True).filter(lambda label: label != "X")


@PROPERTY_SETTINGS
@given(name=st.sampled_from(WHOLE_TOPO), label=TOPO_LINK_CELLS, data=st.data())
def test_property_unknown_link_labels_are_kept(name: str, label: str, data: st.DataObject) -> None:
    original = parse_topo_matrix(fixture(name))
    count = len(original.gpus)
    if count < 2:
        return
    i = data.draw(st.integers(min_value=0, max_value=count - 1))
    j = data.draw(st.integers(min_value=0, max_value=count - 1).filter(lambda value: value != i))
    lines = strip_ansi(fixture(name)).split("\n")
    row = _row_of(lines, f"GPU{i}")
    separator = "\t" if "\t" in lines[row] else None
    cells = lines[row].split(separator) if separator else lines[row].split()
    cells[1 + j] = label
    lines[row] = (separator or "    ").join(cells)

    changed = parse_topo_matrix("\n".join(lines))
    assert changed.links[i][j] == label
    assert changed.gpus == original.gpus
    assert changed.cpu_affinity == original.cpu_affinity
    if label not in ("PIX", "PXB", "PHB", "NODE", "SYS", "SOC") and nvlink_count(label) is None:
        assert label in changed.unknown_labels()


@PROPERTY_SETTINGS
@given(name=st.sampled_from(fixtures_named("topo-p2p")), code=st.from_regex(r"[A-Z]{1,4}", fullmatch=True),
       data=st.data())
def test_property_unknown_p2p_codes_are_kept(name: str, code: str, data: st.DataObject) -> None:
    original = parse_topo_p2p(fixture(name))
    count = len(original.gpus)
    i = data.draw(st.integers(min_value=0, max_value=count - 1))
    j = data.draw(st.integers(min_value=0, max_value=count - 1).filter(lambda value: value != i))
    lines = fixture(name).split("\n")
    row = _row_of(lines, f"GPU{i}")
    cells = lines[row].split("\t")
    cells[1 + j] = code
    lines[row] = "\t".join(cells)

    changed = parse_topo_p2p("\n".join(lines))
    assert changed.pair(i, j) == code
    assert changed.all_ok() is (code == "OK" and original.all_ok())


@PROPERTY_SETTINGS
@given(values=st.dictionaries(st.sampled_from([*QUERY_GPU_FIELDS, "other.field"]), st.text(max_size=30)))
def test_property_convert_query_gpu(values: dict[str, str]) -> None:
    _only_own_errors(convert_query_gpu, values)


@PROPERTY_SETTINGS
@given(rc=st.one_of(st.none(), st.integers(min_value=-255, max_value=255)), stdout=st.text(), stderr=st.text())
def test_property_failure_never_raises(rc: int | None, stdout: str, stderr: str) -> None:
    result = nvidia_smi_failure(rc, stdout, stderr)

    assert result is None or result.split(":", 1)[0] in {
        "not_installed", "timeout", "invalid_field", "version_mismatch", "driver_not_loaded", "nvml_not_found",
        "gpu_lost", "device_handle_error", "no_devices", "nvml_init_failed", "failed",
    }
    if rc not in (0,) and rc is not None:
        assert result is not None


# Fixtures printed with every tab in place (the merged one is the property's own subject).
TABBED_TOPO = [name for name in WHOLE_TOPO if "\t" in fixture(name) and name != MERGED]


@PROPERTY_SETTINGS
@given(name=st.sampled_from(TABBED_TOPO), data=st.data())
def test_property_merged_cells_read_as_printed(name: str, data: st.DataObject) -> None:
    # nvidia-smi loses the tab between two cells (or prints spaces instead): the matrix reads the same.
    original = parse_topo_matrix(fixture(name))
    devices = original.gpus + original.nics
    lines = strip_ansi(fixture(name)).split("\n")
    device = data.draw(st.sampled_from(devices))
    row = _row_of(lines, device)
    cells = lines[row].split("\t")
    # Cell k and k+1 of the row (1..count are the links; a GPU row's next cell is its CPU affinity).
    last = len(devices) if device in original.gpus and original.cpu_affinity[original.gpus.index(device)] else \
        len(devices) - 1
    if last < 1:
        return
    k = data.draw(st.integers(min_value=1, max_value=last))
    separator = data.draw(st.sampled_from(["", " ", "  "]))
    cells[k:k + 2] = [cells[k] + separator + cells[k + 1]]
    lines[row] = "\t".join(cells)

    merged = parse_topo_matrix("\n".join(lines))
    assert merged.links == original.links
    assert merged.nic_links == original.nic_links
    assert merged.nic_to_nic == original.nic_to_nic
    assert merged.cpu_affinity == original.cpu_affinity
    assert merged.numa_affinity == original.numa_affinity


_UNIT_BEFORE = re.compile(r"\s*\[[^\]]*\]$")  # what without_unit replaced: the same result, in linear time


@given(st.lists(st.sampled_from(["[", "]", " ", "\t", "\n", "MiB", "memory.total"]), max_size=12).map("".join))
def test_a_header_field_loses_its_unit_as_the_regex_took_it(value: str) -> None:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_query import without_unit

    assert without_unit(value) == _UNIT_BEFORE.sub("", value)


def test_a_header_field_of_many_brackets_loses_its_unit_in_linear_time() -> None:
    from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_query import without_unit

    from tests.cpu_limit import within

    assert within(1.0, lambda: without_unit("name " + "[" * 65536 + "]")) == "name"


@PROPERTY_SETTINGS
@given(name=st.sampled_from(WHOLE_TOPO), data=st.data())
def test_property_a_topo_cut_after_any_gpu_row_keeps_the_rows_before(name: str, data: st.DataObject) -> None:
    text = strip_ansi(fixture(name))
    whole = parse_topo_matrix(text)
    lines = text.split("\n")
    rows = [_row_of(lines, gpu) for gpu in whole.gpus]
    keep = data.draw(st.integers(min_value=1, max_value=len(rows)))
    cut = parse_topo_matrix("\n".join(lines[:rows[keep - 1] + 1]) + "\n", cut_ok=True)
    assert cut.links[:keep] == whole.links[:keep]
    assert all(row == [None] * len(whole.gpus) for row in cut.links[keep:])
    assert cut.missing_rows[:len(whole.gpus) - keep] == whole.gpus[keep:]
