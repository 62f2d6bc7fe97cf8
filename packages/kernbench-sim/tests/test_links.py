"""Per-link results (``kernbench.sim.links``): counters against the fabric model's definition, the links file's
round trip and its reader's errors.

Expected counts come from the fabric model's rules, not from the engine: a write carries its payload on every wire
of its path in ``ceil(nbytes / packet_bytes)`` packets; a read sends ``control_bytes`` out and its payload back;
a control message is a sideband (one message, 0 bytes); utilisation is busy time over ``[0, now]``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math

import pytest

from kernbench.sim import Component, ComponentRegistry, MemoryReadMsg, MemoryWriteMsg
from kernbench.sim.links import (
    SCHEMA,
    LinkRecord,
    LinksFileError,
    carried_traffic,
    format_top,
    link_records,
    link_report,
    parse_links,
    read_links,
    write_links,
)


def wires(path):
    return list(itertools.pairwise(path))


def test_a_write_puts_its_payload_on_every_wire_of_its_path_and_nothing_elsewhere(make_engine, small_graph,
                                                                                   resolver):
    eng = make_engine()
    nbytes = 3 * eng.packet_bytes + 1000  # three full packets and a short one
    req = eng.submit(MemoryWriteMsg(resolver.hbm_addr(0, 3, 5), nbytes))
    eng.run()
    recs = {(r.src, r.dst): r for r in link_records(eng)}
    path = req.legs[0]
    assert set(recs) == set(wires(path))
    for a, b in wires(path):
        r = recs[(a, b)]
        e = small_graph.edge(a, b)
        assert (r.bytes, r.packets, r.messages) == (nbytes, 4, 1)
        assert r.kind == e.kind and r.bw_gbs == e.bw_gbs and r.latency_ns == e.latency_ns
        # busy at least the serialisation of the payload at this wire's bandwidth, and never beyond the run
        assert nbytes / e.bw_gbs - 1e-9 <= r.busy_ns <= eng.now
        assert r.utilisation == pytest.approx(r.busy_ns / eng.now, rel=1e-15)
        assert r.max_wait_ns >= 0


def test_a_read_sends_a_command_out_and_the_payload_back(make_engine, resolver):
    eng = make_engine()
    nbytes = 9000
    req = eng.submit(MemoryReadMsg(resolver.hbm_addr(0, 1, 2), nbytes))
    eng.run()
    out, back = req.legs
    assert back == tuple(reversed(out))
    recs = {(r.src, r.dst): r for r in link_records(eng)}
    for a, b in wires(out):
        assert (recs[(a, b)].bytes, recs[(a, b)].packets) == (eng.control_bytes, 1)
    for a, b in wires(back):
        assert (recs[(a, b)].bytes, recs[(a, b)].packets) == (nbytes, math.ceil(nbytes / eng.packet_bytes))


class ControlSink(Component):
    """Accepts control messages and does nothing with them."""

    __slots__ = ()

    def on_control(self, payload, t, transfer):
        pass


def test_control_messages_count_as_messages_and_carry_no_bytes(make_engine, test_impls):
    eng = make_engine(reg=ComponentRegistry(tuple((n, ControlSink if n == "io_cpu" else c) for n, c in test_impls)))
    req = eng.submit(MemoryWriteMsg(eng.resolver.hbm_addr(0, 0, 0), 64))
    path = ("tray.host_cpu", "fabric.switch0", "sip0.io0.pcie_ep", "sip0.io0.io_noc", "sip0.io0.io_cpu")
    tr = eng.send_control(req, path, None)
    assert tr.nbytes == 0
    eng.run()
    recs = {(r.src, r.dst): r for r in link_records(eng, include_idle=True)}
    cpu = recs[("sip0.io0.io_noc", "sip0.io0.io_cpu")]
    assert (cpu.bytes, cpu.packets, cpu.messages, cpu.busy_ns, cpu.utilisation) == (0, 0, 1, 0.0, 0.0)
    host = recs[("tray.host_cpu", "fabric.switch0")]
    assert (host.bytes, host.messages) == (64, 2)  # the write and the control message
    # a wire that saw only the control message did not carry traffic: it is left out like an idle one
    assert not carried_traffic(cpu) and carried_traffic(host)
    used = {(r.src, r.dst) for r in link_records(eng)}
    assert ("sip0.io0.io_noc", "sip0.io0.io_cpu") not in used and ("tray.host_cpu", "fabric.switch0") in used
    assert used == {k for k, r in recs.items() if r.bytes > 0}


def test_carrying_traffic_means_bytes_crossed_the_link():
    def rec(nbytes, packets, messages, busy):
        return LinkRecord("a", "b", "k", 1.0, 1.0, nbytes, packets, messages, busy, busy / 100, 0.0)

    assert carried_traffic(rec(64, 1, 1, 0.5))
    assert not carried_traffic(rec(0, 0, 3, 0.0))  # control messages only: a sideband, no bytes, never busy
    assert not carried_traffic(rec(0, 0, 0, 0.0))


def test_in_the_fabric_model_bytes_packets_and_busy_time_agree_on_every_link(make_engine, resolver):
    """bytes > 0, packets > 0 and busy_ns > 0 pick the same links, so the one rule (bytes) loses nothing."""
    eng = make_engine()
    eng.submit(MemoryReadMsg(resolver.hbm_addr(0, 2, 3), 5000))
    eng.submit(MemoryWriteMsg(resolver.hbm_addr(0, 1, 0), 300))
    eng.run()
    every = link_records(eng, include_idle=True)
    assert any(r.bytes for r in every) and any(not r.bytes for r in every)
    assert all((r.bytes > 0) == (r.packets > 0) == (r.busy_ns > 0) == carried_traffic(r) for r in every)


def test_the_report_holds_the_links_with_traffic_and_counts_every_edge(make_engine, small_graph, resolver):
    eng = make_engine()
    eng.submit(MemoryWriteMsg(resolver.hbm_addr(0, 0, 1), 512))
    eng.run()
    report = link_report(eng, {"bench": "unit"})
    every = link_records(eng, include_idle=True)
    assert [(r.src, r.dst) for r in every] == [(e.src, e.dst) for e in small_graph.edges]
    idle = [r for r in every if not r.messages]
    assert idle and all(r.bytes == r.packets == 0 and r.busy_ns == r.utilisation == 0.0 for r in idle)
    assert report.links == report.traffic() == tuple(r for r in every if r.bytes > 0)
    assert 0 < len(report.links) < len(small_graph.edges) == report.edges
    assert report.window_ns == eng.now and report.run["bench"] == "unit"
    assert report.run["topology"] == small_graph.spec.name
    assert report.fabric == {"flit_bytes": 256, "packet_bytes": 4096, "control_bytes": 64}


def test_nothing_run_means_no_traffic_and_zero_utilisation(make_engine):
    eng = make_engine()
    assert link_records(eng) == []
    assert all(r.utilisation == 0.0 for r in link_records(eng, include_idle=True))


def test_busiest_orders_by_utilisation_then_bytes_and_the_table_lists_them(make_engine, resolver):
    eng = make_engine()
    eng.submit(MemoryWriteMsg(resolver.hbm_addr(0, 0, 0), 20000))
    eng.submit(MemoryWriteMsg(resolver.hbm_addr(0, 3, 7), 300))
    eng.run()
    report = link_report(eng)
    top = report.busiest()
    assert [r.utilisation for r in top] == sorted((r.utilisation for r in top), reverse=True)
    assert top[0].busy_ns == max(r.busy_ns for r in report.links)
    host = report.by_edge()[("tray.host_cpu", "fabric.switch0")]
    assert host.bytes == 20300 and host in top  # both writes cross the host link
    assert len(report.busiest(3)) == 3
    text = format_top(report.busiest(3), report.title, report.window_ns)
    assert top[0].label in text.splitlines()[2]
    assert f"{100 * top[0].utilisation:6.2f}%" in text
    assert "no link carried traffic" in format_top([], "x", 0.0)


def test_links_file_round_trip(make_engine, resolver, tmp_path):
    eng = make_engine()
    eng.submit(MemoryReadMsg(resolver.hbm_addr(0, 2, 3), 5000))
    eng.run()
    report = link_report(eng, {"bench": "rt", "device": 0})
    path = write_links(report, tmp_path / "sub" / "links.json")
    text = path.read_text()
    assert text.count("\n") == len(report.links) + 2  # one link per line
    data = json.loads(text)
    assert data["schema"] == SCHEMA and data["units"]["utilisation"] == "busy_ns / window_ns"
    back = read_links(path)
    assert back.links == report.links and back.window_ns == report.window_ns and back.run == dict(report.run)
    assert back.edges == report.edges == len(eng.graph.edges) == data["edges"]
    assert [(r["src"], r["dst"]) for r in data["links"]] == [(r.src, r.dst) for r in link_records(eng)]
    assert all(r["bytes"] > 0 for r in data["links"])
    assert back.title == f"rt on {eng.spec.name} (device 0)"


def test_a_version_1_file_with_every_edge_still_reads(make_engine, resolver):
    """Files written before ``kernbench.links/2`` list every edge and have no ``edges``; they read as before."""
    eng = make_engine()
    eng.submit(MemoryReadMsg(resolver.hbm_addr(0, 2, 3), 5000))
    eng.run()
    data = link_report(eng).to_json()
    every = link_records(eng, include_idle=True)
    data.update(schema="kernbench.links/1", links=[dataclasses.asdict(r) for r in every])
    del data["edges"]
    old = parse_links(data, "old.json")
    assert old.edges == len(every) == len(eng.graph.edges)
    assert old.traffic() == tuple(link_records(eng)) and old.busiest() == link_report(eng).busiest()
    assert [r["src"] for r in old.to_json()["links"]] == [r.src for r in link_records(eng)]


def _valid(make_engine, resolver):
    eng = make_engine()
    eng.submit(MemoryWriteMsg(resolver.hbm_addr(0, 0, 0), 100))
    eng.run()
    return link_report(eng).to_json()


@pytest.mark.parametrize(("mutate", "needle"), [
    (lambda d: d.update(schema="other/1"), "schema is 'other/1'"),
    (lambda d: d.update(window_ns=-1), "window_ns is -1"),
    (lambda d: d.update(links={}), "links is dict"),
    (lambda d: d["links"][3].update(bytes="12"), "links[3].bytes is '12'"),
    (lambda d: d["links"][0].update(utilisation=float("nan")), "links[0].utilisation is nan"),
    (lambda d: d["links"][1].pop("src"), "links[1].src is None"),
    (lambda d: d["links"][2].update(packets=True), "links[2].packets is True"),
    (lambda d: d["links"].append(dict(d["links"][0])), "is listed twice"),
    (lambda d: d.update(fabric={"flit_bytes": -3}), "fabric must be an object"),
    (lambda d: d.pop("edges"), "edges is None"),
    (lambda d: d.update(edges=2), "edges is 2; expected the topology's number of directed edges, at least the"),
])
def test_malformed_links_data_names_the_field_and_the_fix(make_engine, resolver, mutate, needle):
    data = _valid(make_engine, resolver)
    mutate(data)
    with pytest.raises(LinksFileError) as err:
        parse_links(data, "links file x.json")
    msg = str(err.value)
    assert msg.startswith("links file x.json: ") and needle in msg and "kernbench run" in msg and "\n" not in msg


def test_unreadable_and_non_json_links_files(tmp_path):
    with pytest.raises(LinksFileError, match="does not exist"):
        read_links(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "kernbench.links/1",\n "links": [oops]}')
    with pytest.raises(LinksFileError, match=r"bad.json is not valid JSON \(line 2, column 12: Expecting value\)"):
        read_links(bad)
    with pytest.raises(LinksFileError, match="expected a JSON object"):
        parse_links([1, 2])


def test_an_unwritable_links_path_is_a_clear_error(make_engine, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(LinksFileError, match="cannot write the links file"):
        write_links(link_report(make_engine()), blocker / "links.json")
