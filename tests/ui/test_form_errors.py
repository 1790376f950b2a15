"""Form errors in the words of the form: the field's label, the value typed and what to type
instead, the field marked; and what Run now would refuse, refused by the check as you type."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from .conftest import login

CODE = "def train(context, epochs: int = 1):\n    return {'epochs': epochs}\n"
SDK_WORDS = ("with_limits", "with_requests", "9223372036854775807", "set_state_thresholds")


def open_with_code(page: Page, tmp_path: Path) -> None:
    code = tmp_path / "train.py"
    code.write_text(CODE)
    login(page)
    page.goto("/ui/projects/wording/jobs/new")
    page.get_by_label("Code file (.py)").set_input_files(str(code))
    expect(page.get_by_label("Handler")).to_have_value("train")
    page.wait_for_load_state("networkidle")


def test_a_bad_value_is_refused_as_you_type_in_the_field_s_words(
    page: Page, tmp_path: Path
) -> None:
    open_with_code(page, tmp_path)
    limit = page.get_by_label("Memory limit")
    limit.fill("1g")
    limit.blur()  # a change: the check runs
    expect(page.locator("#err-mem_limit")).to_have_text(
        "Memory limit: '1g' is not a quantity; use 512Mi, 1G or 2Gi (Mi and Gi are binary "
        "units, M and G decimal)"
    )
    expect(limit).to_have_attribute("aria-invalid", "true")
    border = limit.evaluate("e => getComputedStyle(e).borderTopColor")
    assert border == "rgb(179, 38, 30)"  # the danger colour
    page.get_by_label("running threshold").fill("soon")
    page.get_by_label("CPU request").fill("99999999999999999999999")
    page.get_by_label("CPU request").blur()
    expect(page.locator("#err-threshold-running")).to_contain_text(
        "running threshold: 'soon' is not a duration"
    )
    expect(page.locator("#err-cpu_request")).to_contain_text("CPU request: ")
    text = page.locator("main").inner_text()
    assert not [word for word in SDK_WORDS if word in text], text

    limit.fill("512Mi")  # corrected: the mark goes
    limit.blur()
    expect(page.locator("#err-mem_limit")).to_have_text("")
    expect(limit).not_to_have_attribute("aria-invalid", "true")


def test_an_unmapped_claim_is_refused_by_the_check_not_only_at_run_now(
    page: Page, tmp_path: Path
) -> None:
    open_with_code(page, tmp_path)
    page.get_by_label("Volumes", exact=True).select_option("manual")
    volumes = page.get_by_role("group", name="Volumes list")
    volumes.get_by_role("button", name="+").click()
    volumes.get_by_label("Volume type").select_option("pvc")
    volumes.get_by_label("Volume name").fill("data")
    volumes.get_by_label("Claim, ConfigMap or Secret").fill("nobody-mapped-this")
    volumes.get_by_label("Mount path").fill("/data")
    volumes.get_by_label("Mount path").blur()
    error = page.locator("#err-volumes_mode")
    expect(error).to_contain_text("Volumes: volume 'data': 'nobody-mapped-this' has no local")
    expect(page.get_by_label("Volumes", exact=True)).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#placement")).to_have_count(0)  # not shown as fitting
