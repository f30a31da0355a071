"""The step table (bringup/steps.py) covers every task deploy.py runs, in the order
deploy.py runs them, and the docs' settings row and step list (docs/settings.md,
docs/deploy.md) and the README's step names say the same."""

import ast
import re
from pathlib import Path

from bringup import steps
from bringup.summary import step_of

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = (ROOT / "docs" / "settings.md").read_text()
DEPLOY = (ROOT / "docs" / "deploy.md").read_text()


def task_titles():
    """Every ``@deploy("...")`` title in tasks/, with its file."""
    for path in sorted((ROOT / "tasks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                for decorator in node.decorator_list:
                    if isinstance(decorator, ast.Call) and getattr(decorator.func, "id", "") == "deploy":
                        yield path.name, decorator.args[0].value


def test_every_task_title_has_a_step():
    titles = list(task_titles())
    assert len(titles) >= len(steps.STEPS)
    missing = [(file, title) for file, title in titles if title not in steps.STEP_OF_TASK]
    assert missing == [], f"tasks with no row in bringup/steps.py: {missing}"
    # And the summary counts a task's operations under its step.
    assert step_of("DeepGEMM pre-compile | Compile DeepGEMM") == "prewarm"


def test_every_step_row_names_tasks_that_exist():
    titles = {title for _, title in task_titles()}
    assert {title for step in steps.STEPS for title in step.tasks} <= titles


def test_deploy_py_runs_the_steps_in_the_tables_order():
    source = (ROOT / "deploy.py").read_text()
    ran = re.findall(r'node\.runs\("([a-z_]+)"\)', source)
    assert ran == list(steps.DEPLOY_STEPS)


def test_the_docs_list_the_steps_as_the_table_does():
    default = re.search(r"^\| `deploy_steps` \| `([^`]+)` \|", SETTINGS, re.M)
    assert default and default[1].split(", ") == list(steps.DEPLOY_STEPS)
    listed = re.findall(r"^\d+\. \*\*[^*]+\*\* \(`tasks/([a-z_]+)\.py`", DEPLOY, re.M)
    files = {path.name[:-3] for path in (ROOT / "tasks").glob("*.py")}
    assert listed and set(listed) <= files
    # Each step has its item, in the table's order, named by the file of its first task.
    file_of = {title: name[:-3] for name, title in task_titles()}
    assert listed == [file_of[step.tasks[0]] for step in steps.STEPS]


def test_the_readme_names_the_steps_in_the_tables_order():
    readme = (ROOT / "README.md").read_text()
    bullet = re.search(r"^- \*\*`deploy\.py`\*\*.*?(?=^- |^#)", readme, re.M | re.S)
    assert bullet, "README: no '- **`deploy.py`**' item under 'The two commands'"
    assert re.findall(r"`([a-z_]+)` \(", bullet[0]) == list(steps.DEPLOY_STEPS)


def step_literals(source):
    """The step names a module writes as literals: ``node.runs("x")``, ``"x" in ...steps``
    and ``{"x", ...} & set(node.steps)``."""
    named = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "runs" and node.args \
                and isinstance(node.args[0], ast.Constant):
            named.append(node.args[0].value)
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn)) \
                and ast.unparse(node.comparators[0]).endswith("steps"):
            named += [n.value for n in ast.walk(node.left) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd) and "steps" in ast.unparse(node.right) \
                and isinstance(node.left, ast.Set):
            named += [n.value for n in node.left.elts if isinstance(n, ast.Constant)]
    return named


def test_every_step_named_in_the_code_is_a_row():
    """A step written as a literal elsewhere (a typo, a step renamed in the table) would
    never run or never be checked, silently: each names a row of the table."""
    product = [ROOT / "deploy.py", ROOT / "validate.py", ROOT / "rollback.py",
               *(path for folder in ("bringup", "control", "tasks", "facts") for path in (ROOT / folder).rglob("*.py"))]
    named = {(path.relative_to(ROOT).as_posix(), step) for path in product for step in step_literals(path.read_text())}
    assert len({step for _, step in named}) >= 5  # the scan finds them at all
    assert sorted((path, step) for path, step in named if step not in steps.DEPLOY_STEPS) == []


def test_a_step_literal_is_found():
    source = ('node.runs("repo")\nif "drivr" not in config.deploy_steps: pass\n'
              'x = {"prewarm", "servce"} & set(node.steps)\n')
    assert step_literals(source) == ["repo", "drivr", "prewarm", "servce"]
