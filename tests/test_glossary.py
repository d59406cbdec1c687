"""The glossary page (术语表) is generated from the chapters' key terms and kept equal to them."""
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import make_glossary  # noqa: E402

# Terms a review found missing (issues 10 and 11): each must be a key term of some chapter.
REQUIRED = ["注意力提示", "非参数注意力汇聚", "温度", "熵", "有效长度", "填充", "强制教学", "对齐",
            "投影", "计算复杂度", "绝对位置", "可学习的位置编码", "编码器-解码器注意力",
            "预训练", "自监督学习", "微调", "下游任务"]


def test_glossary_page_is_fresh_and_terms_have_one_chinese_name():
    result = subprocess.run([sys.executable, "tools/make_glossary.py", "--check"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr + result.stdout


def test_slugify_matches_myst_parser():
    from myst_parser.mdit_to_docutils.base import default_slugify

    for title in ["Scores and weights", "Fine-tuning the [CLS] output", "Why 1/sqrt(d)?",
                  "The 80/10/10 rule, measured"]:
        assert make_glossary.slugify(title) == default_slugify(title)


@pytest.mark.parametrize("chinese", REQUIRED)
def test_required_term_is_in_the_glossary(chinese):
    terms, _ = make_glossary.first_appearances()
    assert chinese in {t[1] for t in terms.values()}, (
        f"{chinese} is not a key term of any chapter: write it as **English term ({chinese})** "
        "where the term first appears")


def test_terms_are_introduced_in_the_text_not_first_in_a_summary():
    terms, _ = make_glossary.first_appearances()
    late = [f"{t[0]} ({t[2].stem})" for t in terms.values()
            if t[4] in ("Summary", "Exercises")]
    assert not late, ("key terms whose first bold (中文) appearance is in a Summary or the "
                      f"Exercises; introduce them where the text first uses them: {late}")


def test_glossary_is_in_the_book():
    assert "file: glossary" in (ROOT / "_toc.yml").read_text()
