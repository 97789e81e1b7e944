"""``sbd_viz.site``: the static site's writer, on the shipped character model with two short prompts (a few seconds).
The folder holds the page, the app's own scrubber files byte for byte, one data script per prompt and a README that
makes it a static Space; the size the page states is the folder's; nothing the page loads lives outside it. Each
prompt's maps are the exact γ maps the library builds, as the app's scrubber payload; each piece's failure table is
the app's rows; a row's call opens that call's block; refusals name the bad argument."""

import json
import re
from urllib.parse import unquote

import pytest

import sbd_viz as sv
from conftest import hand_trace
from sbd_viz import cli
from sbd_viz.analysis.incoherence import failure_events
from sbd_viz.app import scrubber
from sbd_viz.app.panels import failure_rows
from sbd_viz.site import entries, export
from sbd_viz.site.glossary import glossary_html, markdown_html

pytestmark = pytest.mark.usefixtures("one_thread")

PROMPTS = ["assert 79 + 48 == ", 'assert "safe"[::-1] == ']  # gap fills at small γ, none at large; a few pieces


def read_entry(path) -> dict:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("sbdSiteData(") and text.endswith(");\n")
    return json.loads(text[len("sbdSiteData("):-3])


@pytest.fixture(scope="module")
def site(shipped, tmp_path_factory):
    out = tmp_path_factory.mktemp("site") / "site"
    written = export.export_site(out, [shipped], prompts=PROMPTS, command="sbd-viz site --out site")
    return written, {e["key"]: e for e in (read_entry(p) for p in sorted((out / "data").glob("*.js")))}


def test_the_folder_is_the_page_the_apps_scrubber_the_data_and_a_static_space(site):
    written, data = site
    folder = written.folder
    names = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert names == sorted(list(export.FILES) + ["data/p01.js", "data/p02.js"])
    # the app's scrubber, the very files the app loads
    assert (folder / "scrubber.js").read_bytes() == scrubber.SCRIPT_FILE.read_bytes()
    assert (folder / "scrubber.css").read_bytes() == scrubber.STYLE_FILE.read_bytes()
    readme = (folder / "README.md").read_text(encoding="utf-8")
    front = readme.split("---\n")[1]
    assert "sdk: static\n" in front and "app_file: index.html\n" in front
    assert len(re.search(r"short_description: (.*)", front)[1]) <= 60  # a Space's limit
    assert [e["text"] for e in data.values()] == PROMPTS and written.prompts == 2


def test_the_stated_size_is_the_folders(site):
    written, _ = site
    files = [p for p in written.folder.rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    assert (written.bytes, written.files) == (total, len(files))
    for page in ("index.html", "README.md"):
        text = (written.folder / page).read_text(encoding="utf-8")
        assert f"({total:,} bytes) in {len(files)} files" in text, page


def test_nothing_the_page_loads_lives_outside_the_folder(site):
    written, _ = site
    page = (written.folder / "index.html").read_text(encoding="utf-8")
    loads = re.findall(r"<(?:script|link|img|iframe)\b[^>]*?(?:src|href)='([^']*)'", page)
    assert sorted(loads) == ["scrubber.css", "scrubber.js", "site.css", "site.js"]
    for name in ("site.js", "scrubber.js", "site.css", "scrubber.css"):
        text = (written.folder / name).read_text(encoding="utf-8")
        assert not re.search(r"https?://|fetch\(|XMLHttpRequest|@import|url\(", text), name
    cards = re.findall(r"data-file='([^']*)'", page)
    assert cards == ["data/p01.js", "data/p02.js"]


def test_each_map_is_the_exact_gamma_map_as_the_scrubber_draws_it(site, shipped):
    _, data = site
    e = data["p01"]
    settings = dict(block_size=shipped.block_size, max_new_tokens=64, stop=("\n",))
    ntp = sv.decode_ntp(shipped, PROMPTS[0], max_new_tokens=64, stop=("\n",))
    assert e["ntp"]["text"] == ntp.text and e["settings"]["stop"] == ["\n"]
    for mode, verify in (("plain", False), ("verified", True)):
        built = sv.gamma_map(shipped, PROMPTS[0], verify=verify, **settings, **({"drafting": "single"} if verify else {}))
        assert built.exact
        expected = json.loads(json.dumps(scrubber.payload(built, 0.1, ntp.text)))
        got = e["maps"][mode]
        # the verified map swept the mode measured fastest on the model (bench/VERIFIED_MODES.md: single drafting)
        assert got["mode"] == ("single drafting" if verify else None)
        assert {k: v for k, v in got.items() if k not in ("pieces", "mode")} == {
            k: v for k, v in expected.items() if k != "pieces"}
        for row, want, piece in zip(got["pieces"], expected["pieces"], built.pieces, strict=True):
            assert {k: row[k] for k in want} == want
            assert [r[:2] for r in row["failures"]["rows"]] == [r[:2] for r in failure_rows(
                failure_events(shipped, piece.trace))]
            assert len(row["order"]["points"]) == piece.trace.n_tokens
        if verify:  # verified SBD writes NTP's text at every γ: its strip is green end to end
            assert all(p["ntp"] for p in got["pieces"])


def test_a_gap_fill_row_opens_its_call_with_the_gap_fill_outlined(site):
    _, data = site
    rows = [(p, r) for e in data.values() for p in e["maps"]["plain"]["pieces"] if p["decoded"]
            for r in p["failures"]["rows"] if r[0] == "gap fill"]
    assert rows, "the two prompts have gap fills at small γ"
    for piece, (kind, call, block, slot, gap, *_) in rows:
        seen = piece["failures"]["calls"][str(call)]
        cells = next(b["cells"] for b in seen["blocks"] if b["block"] == block)
        assert cells[slot][1] == "gap"
        assert sum(state == "masked" for _, state in cells[:slot]) == gap  # the masked slots to its left
        assert seen["words"].startswith(f"call {call} ")


def test_call_view_reads_the_blocks_state_at_that_call():
    trace = hand_trace()  # block 0: slot 5 (gap 5) at call 0, then slots 0 and 3 (gap 2) at call 1
    first = entries.call_view(trace, 0)["blocks"][0]["cells"]
    assert [state for _, state in first] == ["masked"] * 5 + ["gap"]
    second = entries.call_view(trace, 1)["blocks"][0]["cells"]
    assert [state for _, state in second] == ["now", "masked", "masked", "gap", "masked", "done"]
    assert [label for label, _ in second] == ["a", "", "", "d", "", "f"]
    with pytest.raises(ValueError, match="call"):
        entries.call_view(trace, trace.nfe)


def test_the_glossary_is_html_with_the_ids_its_links_name():
    page = glossary_html()
    ids = set(re.findall(r" id='([^']+)'", page))
    links = {unquote(link) for link in re.findall(r'href="#([^"]+)"', page)}  # a browser decodes "#%CE%B3-gamma"
    assert links and links <= ids, sorted(links - ids)[:5]
    assert "**" not in page and "](" not in page and "<strong>" in page
    outside = markdown_html("[paper](https://arxiv.org/abs/2509.04185) and [a term](#gamma)")
    assert outside.count('target="_blank"') == 1 and 'href="#gamma">' in outside


def test_refusals_name_the_bad_argument(site, shipped, tmp_path):
    written, _ = site
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(ValueError, match="out: .* other files"):
        export.export_site(tmp_path, [shipped], prompts=PROMPTS)
    assert (tmp_path / "mine.txt").read_text() == "keep me"
    with pytest.raises(ValueError, match="out: .* is a file"):
        export.export_site(tmp_path / "mine.txt", [shipped], prompts=PROMPTS)
    with pytest.raises(ValueError, match="prompts"):
        export.export_site(tmp_path / "new", [shipped], prompts="assert 1 == ")
    with pytest.raises(ValueError, match="prompts"):
        export.export_site(tmp_path / "new", [shipped], prompts=["  "])
    with pytest.raises(ValueError, match="per_model"):
        export.export_site(tmp_path / "new", [shipped], per_model=0)
    with pytest.raises(ValueError, match="models: 'sbd-char-5m' is a name"):
        export.export_site(tmp_path / "new", ["sbd-char-5m"])
    assert not (tmp_path / "new").exists()


def test_the_command_writes_again_over_a_site_it_wrote(site, tmp_path, capsys):
    out = tmp_path / "again"
    args = ["site", "--out", str(out), "--model", "sbd-char-5m", "--prompt", PROMPTS[0], "--max-new-tokens", "8"]
    assert cli.main(args) == 0
    assert "site written" in capsys.readouterr().out
    first = read_entry(out / "data" / "p01.js")
    assert first["settings"]["max_new_tokens"] == 8 and first["text"] == PROMPTS[0]
    assert cli.main(args[:-1] + ["4"]) == 0  # the folder is a site it wrote: written again
    assert read_entry(out / "data" / "p01.js")["settings"]["max_new_tokens"] == 4
    readme = (out / "README.md").read_text(encoding="utf-8")
    assert "`sbd-viz site --out " in readme and "--max-new-tokens 4`" in readme
