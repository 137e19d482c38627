"""Every human-facing template of the report and of --fix, in English and Chinese, keyed by id.

A dict rather than stdlib ``gettext``: gettext reads compiled ``.mo`` files, which the package
would have to build and ship (and keep in step with a ``.po`` source); two dicts in one module
need no build step, and ``tests/test_retaincheck_messages.py`` checks that each English template
has a Chinese one with the same placeholders. The JSON report is an API and is never translated:
its ``verdict`` and ``suggestion`` fields stay English in both languages.

A Chinese verdict keeps a fixed tag beside its words, ``不需要（NOT_NEEDED）``: the JSON's
``verdict`` upper-cased, each run of other characters one ``_`` (``zh_tag``), so a reader can
match the Chinese report with the English page and the JSON, and the tag reads as an identifier,
not an English sentence.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

LANGS = ("en", "zh")
ENV = "RETAINCHECK_LANG"


class BadLang(ValueError):
    """A language that is neither ``en`` nor ``zh``."""


def check_lang(value: str, where: str) -> str:
    if value not in LANGS:
        raise BadLang(f"{where}: unknown language {value!r} (use en or zh)")
    return value


def default_lang(environ: Mapping[str, str] | None = None) -> str:
    """``RETAINCHECK_LANG`` if set; else ``zh`` when the locale (``LC_ALL``, ``LC_MESSAGES``,
    ``LANG``: the first that is set and not empty) starts with ``zh``; else ``en``."""
    environ = os.environ if environ is None else environ
    if environ.get(ENV):
        return check_lang(environ[ENV], ENV)
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        if environ.get(name):
            return "zh" if environ[name].lower().startswith("zh") else "en"
    return "en"


EN: dict[str, str] = {
    # the readable report (Report.format)
    "stopped": "retaincheck: the run stopped early ({why}); a graph that nothing reused before "
    "that is only \"not needed so far\"",
    "no_calls": "retaincheck: no backward() or autograd.grad() call used retain_graph=True in "
    "this process (a process it started other than by fork, such as the ranks of "
    "torch.multiprocessing.spawn, is not audited).",
    "header_one": "retaincheck: {n} call site used retain_graph=True",
    "header_many": "retaincheck: {n} call sites used retain_graph=True",
    "raised_before": "{site}  {code}  (raised before it returned)",
    "ran_once": "{site}  {code}  (ran once)",
    "ran_times": "{site}  {code}  (ran {n} times)",
    "verdict": "    verdict: {verdict}",
    "why_raised": ": the call raised, so its graph was never judged",
    "why_walked": ": walked again by {by}",
    "why_walked_runs": " (reused in {reused} of {runs} runs)",
    "why_unseen": ": no later backward() or grad() walked this graph, but saved tensors may be "
    "read at {reads}",
    "why_unseen_more": " and {more} more",
    "why_not_walked": ": no later backward() or grad() walked this graph in this run (code paths "
    "it did not take are not checked)",
    "kept": "    kept:    {size} of saved tensors",
    "kept_runs": "    kept:    {size} of saved tensors (largest run), {peak} at most at once",
    "suggest": "    suggest: {text}",
    "total": "total kept at most at once: {size}, each storage counted once (a storage that "
    "several sites keep counts in each site above)",
    # verdict words, upper-cased in the report
    "v_needed": "NEEDED",
    "v_leak": "NEEDED ONLY BECAUSE HISTORY LEAKS",
    "v_could_not_tell": "COULD NOT TELL: KEPT",
    "v_not_needed": "NOT NEEDED",
    "v_not_needed_so_far": "NOT NEEDED SO FAR (RUN STOPPED EARLY)",
    "v_did_not_complete": "DID NOT COMPLETE",
    # the command line's last words (--fail-on-unneeded)
    "no_report": "retaincheck: the program ended without the audit's report ({how}); no verdict",
    "no_report_signal": "killed by signal {n}",
    "no_report_status": "exit status {n}",
    "gate_incomplete": "retaincheck: the program did not complete (exit status {status}); "
    "no verdict is final",
    "gate_one": "retaincheck: 1 retain_graph=True call site is not needed (exit status {status})",
    "gate_many": "retaincheck: {n} retain_graph=True call sites are not needed "
    "(exit status {status})",
    # the pytest plugin's summary (pytest_plugin.py)
    "p_tests_one": "{n} test audited, ",
    "p_tests_many": "{n} tests audited, ",
    "p_deselected": "{n} deselected, ",
    "p_why_not_run": "could not tell ({n} test(s) not audited, deselected, skipped, left out "
    "or marked no_retaincheck, may reach this line)",
    "p_calls_one": "{n} backward()/grad() call seen",
    "p_calls_many": "{n} backward()/grad() calls seen",
    "p_none": "no retain_graph=True found not needed ({counts})",
    "p_unneeded_one": "{n} retain_graph=True call site not needed ({counts}):",
    "p_unneeded_many": "{n} retain_graph=True call sites not needed ({counts}):",
    "p_kept": "    kept {size} of saved tensors; not needed in:",
    "p_fail": "--retaincheck-fail: exit status {status} when all tests passed",
    "p_fail_quiet": "--retaincheck-fail: exit status {status}: not needed: {sites} (pytest's "
    "terminal plugin is off, so the retaincheck section is not printed)",
    "p_kept_seen": "    kept {size} of saved tensors; looked not needed in:",
    "p_fail_skip": "--retaincheck-fail: exit status {status} when all tests passed (unproven: "
    "--retaincheck-skip-proof, no rerun without the flag)",
    "p_proof": "--retaincheck-fail: the tests rerun without the flag: {how}",
    "p_refuted_one": "{n} retain_graph=True call site looked not needed ({counts}), but the "
    "tests fail without it: keep it:",
    "p_refuted_many": "{n} retain_graph=True call sites looked not needed ({counts}), but the "
    "tests fail without them: keep them:",
    "p_unproven_one": "{n} retain_graph=True call site looked not needed ({counts}); could not "
    "tell: keep it:",
    "p_unproven_many": "{n} retain_graph=True call sites looked not needed ({counts}); could "
    "not tell: keep them:",
    "p_unaudited": "not audited (another retaincheck.audit() was active): {n} test(s); mark "
    "them @pytest.mark.no_retaincheck",
    "p_outlived": "kept, not listed: {sites}: looked not needed, but the graph outlived its "
    "test (a fixture of wider scope, a global, or an attribute of the test's class instance, "
    "which pytest keeps to the session's end, held it), and a later test may walk it unseen",
    "p_unsure": "kept, not listed: {site}: {why}",
    "p_unsure_more": "kept, not listed: {n} more sites that could not tell",
    # suggestions (_suggest.suggestion)
    "s_did_not_complete": "the call raised before it returned, so nothing can be said about it: "
    "fix that error, then run retaincheck again",
    "s_leak": "detach the hidden state (or running value) you carry into the next iteration, "
    "e.g. h = h.detach(), then remove retain_graph=True; if it must go on passing gradients "
    "back (a tensor computed once before the loop and trained through every step), compute it "
    "inside the loop instead",
    "s_could_not_tell": "keep it: the program reads saved tensors (grad_fn._saved_*, "
    "ctx.saved_tensors) at {read}, which the audit cannot tie to a graph; without the flag that "
    "read raises once backward() has freed them",
    "s_so_far": "nothing reused this graph before the run stopped: run the script to completion "
    "and check again before removing retain_graph=True",
    "s_not_needed_create": "nothing walked this graph again; create_graph=True retains it anyway, "
    "so pass retain_graph=False to free it",
    "s_not_needed": "remove retain_graph=True: nothing walked this graph again",
    "s_create": "keep it (create_graph=True already implies retain_graph=True, so the flag itself "
    "can go)",
    "s_rows_backward": "keep it: each run sends its own gradient back through the same output "
    "(one per class or row); if every gradient is known before the first run, "
    "torch.autograd.grad(out, inputs, grad_outputs=rows, is_grads_batched=True) computes them all "
    "in one call",
    "s_step_between": "keep it: an optimizer step ran between this backward() and the one that "
    "reused the graph (as in a GAN's D and G updates), so the losses cannot simply be summed. A "
    "check only you can make: if the first loss must not train the shared part, it may see a "
    "detached copy (e.g. D(fake.detach())) and the flag can go; if its gradient must reach that "
    "part, keep both",
    "s_grad_between": "keep it: the code between this backward() and the one that reuses its "
    "graph reads, zeroes or steps with a gradient (.grad, zero_grad(), step()), or a gradient "
    "hook sees each call's gradient, so the losses cannot be summed into one backward()",
    "s_self_backward": "keep it if these backward() calls reuse one forward pass on purpose: if "
    "the gradients are only added (no zero_grad(), optimizer step or gradient read in between), "
    "sum the losses and call backward() once; if instead a hidden state or running total is "
    "carried into the next iteration and its gradient need not flow back into earlier iterations "
    "(a check only you can make), detach it (h = h.detach()) and drop the flag",
    "s_sum": "keep it, or, if the gradients are only added (no zero_grad(), optimizer step or "
    "gradient read between the backward() calls), sum the losses and call backward() once",
    "s_batched": "keep it, or, if every grad_outputs is known before the first call (rows of one "
    "Jacobian, not a power iteration), compute them in one call with is_grads_batched=True",
    "s_all_inputs": "keep it, or take the gradients with respect to all the inputs in one call: "
    "torch.autograd.grad(outputs, [input_1, input_2, ...])",
    "s_self_grad": "keep it: later runs of this grad() line take gradients through the same graph",
    "s_walked_by": "keep it: this graph is walked again by {by}",
    # sizes (_sizes.human): KiB and larger read the same in both languages
    "bytes": "{n} bytes",
    # --fix's plan (_fix.fix): header, one line per site, the reason each kept site stays
    "f_nothing_to_fix": "retaincheck --fix: nothing to fix (no call used retain_graph=True)",
    "f_nothing_to_change": "retaincheck --fix: nothing to change",
    "f_head_refuted": "retaincheck --fix: nothing written; {what}, {how}",
    "f_head_wrote": "retaincheck --fix: wrote {what}, {how}",
    "f_head_unwritten": "retaincheck --fix: nothing written ({problem}); {what}, {how}",
    "f_changed_meanwhile": "{path} changed while the proof ran",
    "f_write_failed": "could not write {path}: {error}",
    "f_head_plan": "retaincheck --fix: {what}, {how} (not written; add --write to apply)",
    "f_what": "{changes} in {files}",
    "f_changes_one": "{n} change",
    "f_changes_many": "{n} changes",
    "f_files_one": "{n} file",
    "f_files_many": "{n} files",
    "f_unproven": "unproven",
    "f_unproven_skip": "unproven (--skip-proof: no rerun checked it)",
    "f_proven": "proven: {reason}",
    "f_not_proven": "NOT proven: {reason}",
    "f_remove": "remove retain_graph=True (not needed in this run; code paths it did not take "
    "are not checked)",
    "f_remove_unproven": "remove retain_graph=True (not needed in this run, unproven; code paths "
    "it did not take are not checked)",
    "f_removed": "removed retain_graph=True (not needed in this run; code paths it did not take "
    "are not checked)",
    "f_removed_unproven": "removed retain_graph=True (not needed in this run, unproven; code "
    "paths it did not take are not checked)",
    "k_incomplete_status": "kept: the run did not complete (exit status {status}), so no verdict "
    "is final",
    "k_incomplete_stopped": "kept: the run did not complete (it stopped early), so no verdict is "
    "final",
    "k_raised": "kept: did not complete (every call at this site raised)",
    "k_needed": "kept: needed (walked again by {by})",
    "k_needed_runs": "kept: needed (walked again in {reused} of {runs} runs by {by})",
    "k_could_not_tell": "kept: could not tell (saved tensors may be read at {read})",
    "k_leak": "kept: needed only because history leaks (detach the carried-over state first)",
    "k_create": "kept: create_graph=True retains the graph anyway (retain_graph defaults to "
    "create_graph), so removing retain_graph=True frees nothing; write retain_graph=False by hand",
    "k_verdict": "kept: the verdict is {verdict}",
    "k_not_file": "kept: {file} is not a file",
    "k_gone": "kept: its source file is gone or changed since the run",
    "k_ambiguous": "kept: {file} matches {n} files; fix it by hand",
    "k_installed": "kept: the file belongs to an installed package or the standard library",
    "k_no_parse": "kept: libcst cannot parse the file",
    "k_no_keyword": "kept: no retain_graph= keyword argument on this line (passed positionally "
    "or through **kwargs?); change it by hand",
    "k_two_calls": "kept: {n} calls pass retain_graph= here; fix it by hand",
    "k_not_literal": "kept: retain_graph={value} is not the literal True (other runs may pass "
    "True for a reason)",
    "k_comment": "kept: a comment or unusual syntax sits in this call; fix it by hand",
    "k_rewrite": "kept: could not rewrite it ({error})",
    "k_refuted_one": "kept: the rerun without retain_graph=True failed, so the verdict was wrong "
    "here (please report it)",
    "k_refuted_many": "kept: the rerun with all {n} changes failed",
    # who walked a refuted site's graph again (CallRecord.reused_by; the JSON keeps the English)
    "by_rerun_one": "a rerun without retain_graph=True, which failed",
    "by_rerun_many": "a rerun without all {n} retain_graph=True, which failed",
    # the proof's result (_proof.prove)
    "proof_distributed": "a rank of a distributed run (WORLD_SIZE > 1) cannot be rerun alone",
    "proof_no_start": "the rerun could not start ({error})",
    "proof_timeout": "the rerun was still running after {seconds} s (ten times as long as the "
    "audited run took, a minute at least) and was stopped",
    "proof_failed": "the rerun failed (exit status {status}): {error}",
    "proof_same_code": " (the flag was off at {site} too, a line with the same code; the "
    "failure may be that line's)",
    "proof_status": "the rerun exited with status {status}, the audited run with {audited}: "
    "{error}",
    "proof_caught": "the rerun raised a freed-graph error that the program caught: {error}",
    "proof_stdout": "the rerun's standard output differs from the audited run's ({diff})",
    "proof_stdout_order": "the rerun printed the audited run's lines in another order (first "
    "difference: {diff}); the order may be the program's own (threads, processes) or come from "
    "the flag (an object freed earlier)",
    "proof_line": "line {n}: {old} became {new}",
    "proof_lines": "{old} lines became {new}",
    "proof_no_output": "no output",
    "proof_stdin": "the program's standard input was too long to give the rerun again",
    "proof_stdin_socket": "the program's standard input is a socket, which a rerun does not "
    "get again",
    "proof_site_not_run": "the rerun never ran {site} (it took another path: a checkpoint or a "
    "cache outside the working folder?), so it proves nothing about that flag",
    "proof_cache_big": "pytest's cache holds over {n} MiB, too much to give the rerun a copy "
    "of",
    "proof_cache_order": "the tests ran in an order pytest's cache decides (--lf, --ff, --nf, "
    "--sw), which a rerun does not repeat",
    "proof_in_process": "pytest was started from other code (pytest.main, a script), which a "
    "rerun of python -m pytest does not repeat",
    "proof_stdin_tests": "the tests could read the session's standard input (-s), which a "
    "rerun does not get again",
    "proof_options": "Python ran with {options}, which would keep the rerun out of reach",
    "proof_leftover": "part of the program was still running when it ended ({what}), and may "
    "have changed what the rerun starts from",
    "proof_early_plugin": "the project's plugin {name} was imported before retaincheck's, so "
    "what it did to the folder was not seen",
    "proof_big_folder": "the working folder holds over {n} files, too many to tell what the "
    "run changed in it",
    "proof_state": "the rerun read {path}, which the audited run had written, so it may have "
    "taken another path (run the check in a fresh folder)",
    "proof_ok": "a rerun with the changes exited {status} as the audited run did ({seconds} s)",
    "proof_ok_flag": "the rerun exited {status} as the audited run did ({seconds} s)",
    "proof_no_file": "the call site is in code with no file (exec, eval), so no rerun can "
    "turn its flag off",
    "proof_unreached": "part of the program ran out of the rerun's reach ({command}), so the "
    "flag may have stayed on there",
    # command-line errors of --fix (printed after "retaincheck: error: ")
    "e_write": "--write only goes with --fix",
    "e_skip_proof": "--skip-proof only goes with --fix or --fail-on-unneeded",
}

ZH: dict[str, str] = {
    "stopped": "retaincheck：程序提前停止（{why}）；停止前还没被再次使用的计算图，"
    "结论最多只能是“目前不需要”",
    "no_calls": "retaincheck：这个进程里没有 backward() 或 autograd.grad() 调用使用 "
    "retain_graph=True（它以 fork 以外的方式启动的进程不受检查，比如 torch.multiprocessing.spawn "
    "启动的各个 rank）。",
    "header_one": "retaincheck：{n} 处调用使用了 retain_graph=True",
    "header_many": "retaincheck：{n} 处调用使用了 retain_graph=True",
    "raised_before": "{site}  {code}  （返回前就抛出了异常）",
    "ran_once": "{site}  {code}  （执行 1 次）",
    "ran_times": "{site}  {code}  （执行 {n} 次）",
    "verdict": "    结论：{verdict}",
    "why_raised": "。调用抛出了异常，它的计算图无从判断",
    "why_walked": "。再次遍历这张计算图的是{by}",
    "why_walked_runs": "（{runs} 次执行中有 {reused} 次被再次使用）",
    "why_unseen": "。之后没有 backward() 或 grad() 遍历这张计算图，但 {reads} 处的代码"
    "可能读取保存张量",
    "why_unseen_more": "等（另有 {more} 处）",
    "why_not_walked": "。本次运行中，之后没有 backward() 或 grad() 遍历这张计算图"
    "（本次没有走到的代码路径不在检查范围内）",
    "kept": "    保留的保存张量：{size}",
    "kept_runs": "    保留的保存张量：{size}（各次执行中最多），同一时刻最多 {peak}",
    "suggest": "    建议：{text}",
    "total": "同一时刻最多共保留 {size}（每块存储只计一次；"
    "几处调用共同保留的存储，在上面每一处都计入）",
    "v_needed": "需要（NEEDED）",
    "v_leak": "需要，只因历史泄漏（NEEDED_ONLY_BECAUSE_HISTORY_LEAKS）",
    "v_could_not_tell": "无法判断，留着（COULD_NOT_TELL_KEPT）",
    "v_not_needed": "不需要（NOT_NEEDED）",
    "v_not_needed_so_far": "目前不需要，程序提前停止（NOT_NEEDED_SO_FAR_RUN_STOPPED_EARLY）",
    "v_did_not_complete": "未完成（DID_NOT_COMPLETE）",
    "no_report": "retaincheck：程序结束时没能留下检查报告（{how}），没有任何结论",
    "no_report_signal": "被信号 {n} 终止",
    "no_report_status": "退出状态 {n}",
    "gate_incomplete": "retaincheck：程序没有运行完（退出状态 {status}），所有结论都只是暂定的",
    "gate_one": "retaincheck：1 处 retain_graph=True 不需要（退出状态 {status}）",
    "gate_many": "retaincheck：{n} 处 retain_graph=True 不需要（退出状态 {status}）",
    "p_tests_one": "检查了 {n} 个测试，",
    "p_tests_many": "检查了 {n} 个测试，",
    "p_deselected": "{n} 个未选中，",
    "p_why_not_run": "无法判断（有 {n} 个测试未被选中、被跳过、被排除或标了 no_retaincheck，"
    "没有受检查，它们可能会执行到这一行）",
    "p_calls_one": "记录到 {n} 次 backward()/grad() 调用",
    "p_calls_many": "记录到 {n} 次 backward()/grad() 调用",
    "p_none": "没有发现不需要的 retain_graph=True（{counts}）",
    "p_unneeded_one": "{n} 处 retain_graph=True 不需要（{counts}）：",
    "p_unneeded_many": "{n} 处 retain_graph=True 不需要（{counts}）：",
    "p_kept": "    保留的保存张量：{size}；在以下测试中不需要",
    "p_fail": "--retaincheck-fail：所有测试都通过了，但有上面这些不需要的参数，"
    "所以退出状态为 {status}",
    "p_kept_seen": "    保留的保存张量：{size}；在以下测试中看起来不需要",
    "p_fail_quiet": "--retaincheck-fail：退出状态为 {status}：不需要的位置：{sites}"
    "（pytest 的终端插件已关闭，所以不打印 retaincheck 结果部分）",
    "p_fail_skip": "--retaincheck-fail：所有测试都通过了，但有上面这些不需要的参数，"
    "所以退出状态为 {status}（未经验证：用了 "
    "--retaincheck-skip-proof，没有去掉参数重新运行）",
    "p_proof": "--retaincheck-fail：去掉参数重新运行了这些测试。{how}",
    "p_refuted_one": "{n} 处 retain_graph=True 看起来不需要（{counts}），但去掉后测试失败，"
    "留着这个参数：",
    "p_refuted_many": "{n} 处 retain_graph=True 看起来不需要（{counts}），但去掉后测试失败，"
    "留着这些参数：",
    "p_unproven_one": "{n} 处 retain_graph=True 看起来不需要（{counts}），但无法判断，"
    "留着这个参数：",
    "p_unproven_many": "{n} 处 retain_graph=True 看起来不需要（{counts}），但无法判断，"
    "留着这些参数：",
    "p_unaudited": "未检查（已有另一个 retaincheck.audit() 在运行）：{n} 个测试；"
    "请给它们加上 @pytest.mark.no_retaincheck",
    "p_outlived": "保留，未列出：{sites}：看起来不需要，但计算图在测试结束后还活着"
    "（被作用域更大的 fixture、全局变量，或测试类实例的属性引用着；"
    "pytest 会把测试类实例一直留到会话结束），后面的测试可能再次遍历它，而检查看不到",
    "p_unsure": "保留，未列出：{site}：{why}",
    "p_unsure_more": "保留，未列出：另有 {n} 处无法判断",
    "s_did_not_complete": "调用在返回前抛出了异常，无法对它下结论：先修好这个错误，"
    "再运行一次 retaincheck",
    "s_leak": "用 detach() 切断带入下一轮迭代的隐藏状态（或累计值），例如 h = h.detach()，"
    "再去掉 retain_graph=True；如果它还得继续把梯度传回去（在循环前算一次、每一步都要经它训练的"
    "张量），就改为在循环里计算它",
    "s_could_not_tell": "留着这个参数。程序在 {read} 处读取保存张量（grad_fn._saved_*、"
    "ctx.saved_tensors），retaincheck 无法确定读的是哪张计算图；去掉这个参数后，"
    "一旦 backward() 释放了保存张量，这次读取就会报错",
    "s_so_far": "程序停止前没有调用再次使用这张计算图。先让脚本完整运行、再检查一次，"
    "然后再决定是否去掉 retain_graph=True",
    "s_not_needed_create": "没有调用再次遍历这张计算图；create_graph=True 本身就会保留它，"
    "所以要传 retain_graph=False 才能释放",
    "s_not_needed": "去掉 retain_graph=True，之后没有调用再遍历这张计算图",
    "s_create": "计算图需要保留；create_graph=True 已经隐含 retain_graph=True，"
    "所以这个参数本身可以去掉",
    "s_rows_backward": "留着这个参数。每次执行都沿同一个输出反向传播自己的梯度"
    "（每个类别或每一行一个）；"
    "如果第一次执行前所有梯度都已知，也可以用 torch.autograd.grad(out, inputs, "
    "grad_outputs=rows, is_grads_batched=True) 一次算完",
    "s_step_between": "留着这个参数。这次 backward() 与再次使用计算图的那次之间做了优化器更新"
    "（如 GAN 中判别器 D 和生成器 G 的更新），不能简单地把损失相加。"
    "有一点只有你能确认：如果第一个损失不该训练共用的那部分，"
    "就只把切断后的副本交给它（例如 D(fake.detach())），这个参数就可以去掉；"
    "如果它的梯度必须传到共用的那部分，两处都要留着",
    "s_grad_between": "留着这个参数。这次 backward() 与再次使用其计算图的那次之间，"
    "代码读取或清零了梯度、"
    "做了优化器更新（.grad、zero_grad()、step()），或者有梯度钩子分别看到每次调用的梯度，"
    "不能把损失合成一次 backward()",
    "s_self_backward": "如果这些 backward() 是有意重复使用同一次前向传播，就留着这个参数。"
    "如果梯度只是"
    "累加（几次 backward() 之间没有 zero_grad()、优化器更新或读取梯度），"
    "也可以把损失相加后只调用一次 backward()。"
    "如果是把隐藏状态或累计值带入下一轮迭代，而它的梯度不必传回更早的迭代（这一点只有你能确认），"
    "就用 detach() 切断它（h = h.detach()），再去掉这个参数",
    "s_sum": "留着这个参数；如果梯度只是累加（几次 backward() 之间没有 zero_grad()、优化器更新"
    "或读取梯度），也可以把损失相加后只调用一次 backward()",
    "s_batched": "留着这个参数；如果第一次调用前所有 grad_outputs 都已知（同一个雅可比矩阵的各行，"
    "而不是幂迭代），也可以用 is_grads_batched=True 一次算完",
    "s_all_inputs": "留着这个参数；或者一次调用就对所有输入求梯度，"
    "写成 torch.autograd.grad(outputs, "
    "[input_1, input_2, ...])",
    "s_self_grad": "留着这个参数，这一行 grad() 之后的执行还要沿同一张计算图求梯度",
    "s_walked_by": "留着这个参数，因为再次遍历这张计算图的是{by}",
    "bytes": "{n} 字节",
    "f_nothing_to_fix": "retaincheck --fix：无需修改（没有调用使用 retain_graph=True）",
    "f_nothing_to_change": "retaincheck --fix：没有可改的地方",
    "f_head_refuted": "retaincheck --fix：未写入任何文件；{what}，{how}",
    "f_head_wrote": "retaincheck --fix：已写入 {what}，{how}",
    "f_head_unwritten": "retaincheck --fix：未写入任何文件（{problem}）；{what}，{how}",
    "f_changed_meanwhile": "验证期间 {path} 被改动了",
    "f_write_failed": "无法写入 {path}：{error}",
    "f_head_plan": "retaincheck --fix：{what}，{how}；尚未写入，加上 --write 才会写入",
    "f_what": "{files}，{changes}",
    "f_changes_one": "{n} 处改动",
    "f_changes_many": "{n} 处改动",
    "f_files_one": "{n} 个文件",
    "f_files_many": "{n} 个文件",
    "f_unproven": "未验证",
    "f_unproven_skip": "未验证（--skip-proof：没有重新运行来核对）",
    "f_proven": "已验证：{reason}",
    "f_not_proven": "未通过验证：{reason}",
    "f_remove": "删除 retain_graph=True（本次运行中不需要；本次没有走到的代码路径不在检查范围内）",
    "f_remove_unproven": "删除 retain_graph=True（本次运行中不需要，未验证；"
    "本次没有走到的代码路径不在检查范围内）",
    "f_removed": "已删除 retain_graph=True（本次运行中不需要；"
    "本次没有走到的代码路径不在检查范围内）",
    "f_removed_unproven": "已删除 retain_graph=True（本次运行中不需要，未验证；"
    "本次没有走到的代码路径不在检查范围内）",
    "k_incomplete_status": "不改：程序没有运行完（退出状态 {status}），所有结论都只是暂定的",
    "k_incomplete_stopped": "不改：程序没有运行完（提前停止），所有结论都只是暂定的",
    "k_raised": "不改：未完成（这个位置的每次调用都抛出了异常）",
    "k_needed": "不改：需要（再次遍历计算图的是{by}）",
    "k_needed_runs": "不改：需要（{runs} 次执行中有 {reused} 次被再次使用，再次遍历的是{by}）",
    "k_could_not_tell": "不改：无法判断（{read} 处的代码可能读取保存张量）",
    "k_leak": "不改：需要，只因历史泄漏（先用 detach() 切断带入下一轮迭代的状态）",
    "k_create": "不改：create_graph=True 本身就会保留计算图（retain_graph 的默认值就是 "
    "create_graph），删掉 retain_graph=True 释放不了任何东西；"
    "要释放，请手动写上 retain_graph=False",
    "k_verdict": "不改：结论是{verdict}",
    "k_not_file": "不改：{file} 不是文件",
    "k_gone": "不改：运行之后，源文件已被删除或改动",
    "k_ambiguous": "不改：{file} 对应 {n} 个文件，请手动修改",
    "k_installed": "不改：这个文件属于已安装的包或标准库",
    "k_no_parse": "不改：libcst 无法解析这个文件",
    "k_no_keyword": "不改：这一行没有 retain_graph= 关键字参数（也许是按位置或经由 **kwargs "
    "传入的），请手动修改",
    "k_two_calls": "不改：这一行有 {n} 个调用传了 retain_graph=，请手动修改",
    "k_not_literal": "不改：retain_graph={value} 不是字面量 True（别的运行可能有理由传入 "
    "True）",
    "k_comment": "不改：这个调用里有注释或不常见的写法，请手动修改",
    "k_rewrite": "不改：无法改写（{error}）",
    "k_refuted_one": "不改：去掉 retain_graph=True 后重新运行失败，说明这里的结论错了"
    "（请报告这个问题）",
    "k_refuted_many": "不改：应用全部 {n} 处改动后重新运行失败",
    "by_rerun_one": "去掉 retain_graph=True 后的重新运行（它失败了）",
    "by_rerun_many": "去掉全部 {n} 处 retain_graph=True 后的重新运行（它失败了）",
    "proof_distributed": "分布式运行（WORLD_SIZE > 1）中的单个进程无法单独重新运行",
    "proof_no_start": "无法启动重新运行（{error}）",
    "proof_timeout": "重新运行过了 {seconds} 秒（受检查的那次运行用时的十倍，至少一分钟）"
    "还没结束，已被停止",
    "proof_failed": "重新运行失败（退出状态 {status}）：{error}",
    "proof_same_code": "（{site} 的代码与之相同，那里的参数也一并关掉了，失败可能出在那一行）",
    "proof_status": "重新运行的退出状态是 {status}，受检查的那次是 {audited}：{error}",
    "proof_caught": "重新运行时抛出了计算图已释放的错误，被程序自己捕获：{error}",
    "proof_stdout": "重新运行的标准输出与受检查的那次不同（{diff}）",
    "proof_stdout_order": "重新运行打印的行与受检查的那次相同，但顺序不同（第一处不同：{diff}）；"
    "顺序可能本来就不固定（线程、进程），也可能是这个参数造成的（某个对象被提前释放）",
    "proof_line": "第 {n} 行：{old} 变成了 {new}",
    "proof_lines": "{old} 行变成了 {new} 行",
    "proof_no_output": "没有输出",
    "proof_stdin": "程序的标准输入太长，无法原样交给重新运行",
    "proof_stdin_socket": "程序的标准输入是套接字，重新运行拿不到同样的输入",
    "proof_site_not_run": "重新运行根本没有执行到 {site}（它走了另一条路径：也许读了工作目录"
    "之外的检查点或缓存？），所以证明不了这个参数的任何事",
    "proof_cache_big": "pytest 的缓存超过 {n} MiB，太大了，无法给重新运行复制一份",
    "proof_cache_order": "测试的顺序由 pytest 的缓存决定（--lf、--ff、--nf、--sw），"
    "重新运行重现不了",
    "proof_in_process": "pytest 是由别的代码（pytest.main 或脚本）启动的，"
    "重新运行 python -m pytest 重现不了那部分",
    "proof_stdin_tests": "测试能读取这次会话的标准输入（-s），重新运行拿不到同样的输入",
    "proof_options": "Python 以 {options} 启动，重新运行会因此脱离检查的范围",
    "proof_leftover": "程序结束时还有一部分在运行（{what}），可能改动了重新运行的起点",
    "proof_early_plugin": "项目自己的插件 {name} 在 retaincheck 的插件之前导入，"
    "它对目录的改动看不到",
    "proof_big_folder": "工作目录里的文件超过 {n} 个，太多了，看不出这次运行改动了哪些",
    "proof_state": "重新运行读取了受检查的那次运行写下的 {path}，可能因此走了另一条路径"
    "（请在一个干净的目录里检查）",
    "proof_ok": "应用改动后重新运行，与受检查的那次一样以状态 {status} 退出（{seconds} 秒）",
    "proof_ok_flag": "重新运行与受检查的那次一样以状态 {status} 退出（{seconds} 秒）",
    "proof_no_file": "这个调用位置所在的代码没有对应的文件（exec、eval），"
    "重新运行时无法关掉它的参数",
    "proof_unreached": "程序有一部分不在重新运行的掌控之内（{command}），"
    "那里的参数可能仍然开着",
}

# The gate's proof (--fail-on-unneeded without --fix), calls that did not run, forked children.
EN.update({
    "gate_proof_one": "retaincheck: checked without that 1 retain_graph=True (nothing written): "
    "{how}",
    "gate_proof_many": "retaincheck: checked without those {n} retain_graph=True (nothing "
    "written): {how}",
    "gate_skipped": "retaincheck: --skip-proof: the program was not rerun without the flag, so "
    "the verdict is unproven",
    "why_untaken": ": no later backward() or grad() walked this graph in this run, but the "
    "backward()/grad() call at {calls} did not run after this one first ran; on a path this run "
    "did not take, it may walk this graph",
    "k_untaken": "kept: could not tell (the call at {call} did not run after this one first ran)",
    "s_untaken": "keep it, or run the program with arguments that reach {call} after this call "
    "(a backward() or grad() next to this one that did not run after this one first ran) and "
    "check again",
    "by_child": "a forked child process",
    "why_unproven": ": no later backward() or grad() walked this graph, but removing the flag "
    "is not proven ({reason})",
    "s_unproven": "keep it: the reason above says why the rerun without the flag proves nothing",
    "k_unproven": "kept: could not tell (the rerun without the flag is not a proof)",
    "why_child": ": no later backward() or grad() walked this graph in this process, but a "
    "child process forked during the run (pid {pids}) was still running at its end and may "
    "walk it",
    "s_child": "keep it, or wait for the forked child processes to finish (join them) before "
    "the run ends, and check again",
    "k_child": "kept: could not tell (a forked child process, pid {pids}, was still running)",
    "why_part": ": no later backward() or grad() walked what this call ran, but a later pass "
    "walked part of its graph that the call's inputs left out; with other inputs the call "
    "would free that part, and the later pass would raise",
    "s_part": "keep it, unless every run of this call passes inputs that leave out what the "
    "later pass walks (a check only you can make)",
    "k_part": "kept: could not tell (a later pass walked part of the graph this call's "
    "inputs left out)",
    "why_compiled": ": no later backward() or grad() walked this graph, but it runs a backward "
    "that torch.compile compiles at its first run from that run's retain_graph; without the "
    "flag it may be compiled with donated buffers, and a later retain_graph=True through the "
    "same compiled code then raises",
    "s_compiled": "keep it, unless no backward() through this compiled model ever uses "
    "retain_graph=True (a check only you can make)",
    "k_compiled": "kept: could not tell (a torch.compile'd backward reads the flag)",
    "why_passed": ": no later backward() or grad() walked this graph, but the flag is not "
    "the literal True here (a name, an expression, a value by position, *args or **kwargs): "
    "the line that writes it is elsewhere, and the program may look at its value",
    "s_passed": "keep it: its value comes from elsewhere (an argument, a config, a caller, a "
    "wrapper) and may be True on another run; to check this call, write retain_graph=True "
    "in it and run retaincheck again",
    "k_passed": "kept: could not tell (the flag is not the literal True here: it comes from "
    "another line)",
    "why_observed": ": no later backward() or grad() walked this graph, but the call went "
    "through a __torch_function__ (a tensor subclass's or a TorchFunctionMode's), which sees "
    "the flag and may act on it",
    "s_observed": "keep it, unless that __torch_function__ never looks at retain_graph (a check "
    "only you can make)",
    "k_observed": "kept: could not tell (a __torch_function__ on the way sees the flag)",
    "why_watched": ": no later backward() or grad() walked this graph, but a profile or trace "
    "function of the program's (sys.setprofile, sys.settrace, sys.monitoring) saw the call, "
    "its flag included, and may act on it",
    "s_watched": "keep it, unless that profile or trace function never looks at retain_graph "
    "(a check only you can make); run retaincheck without it to check the flag",
    "k_watched": "kept: could not tell (a profile or trace function of the program's sees the "
    "flag)",
    "why_unread": ": no later backward() or grad() walked this graph, but the code of this line "
    "cannot be read (compiled from a string, its file changed or went away after it ran, or "
    "its relative file name fits no file that compiles to it, or two), so "
    "whether the flag is the literal True here cannot be seen",
    "s_unread": "keep it; to check it, put the code in a file and run retaincheck on that",
    "k_unread": "kept: could not tell (the code of this line cannot be read)",
    "why_once": ": no later backward() or grad() walked this graph, but its loop was not seen "
    "running this line in two iterations of one run of the loop: with more iterations it may "
    "walk a graph it kept again",
    "s_once": "keep it, or run the program so that the loop runs at least twice and check again",
    "k_once": "kept: could not tell (its loop was not seen running it twice)",
    "why_held": ": no later backward() or grad() walked this graph, and its loop was seen running "
    "this line in two iterations, but the program holds a graph from before an iteration (made "
    "before the loop, or kept from an earlier iteration, in a name, an attribute, a cache, an "
    "iterator): a later iteration may walk it",
    "s_held": "keep it, or make that graph inside the loop (or detach it) and check again",
    "k_held": "kept: could not tell (a graph from an earlier iteration is held)",
    "why_generated": ": no later backward() or grad() walked this graph, but this line's file "
    "was written while the program ran (code it generated), so its literal True may be "
    "written otherwise on another run",
    "s_generated": "keep it; to check it, look at the code that writes this file and its "
    "options",
    "k_generated": "kept: could not tell (this line's file was written while the program ran)",
    "proof_tracer": "the program sets its own trace function, so the rerun could not watch for "
    "freed-graph errors it catches",
    "proof_interrupted": "the rerun was interrupted (Ctrl-C)",
    "proof_stopped": "the audited run got {signal}, so no rerun was started",
})
ZH.update({
    "gate_proof_one": "retaincheck：去掉这 1 处 retain_graph=True 后重新运行做了核对"
    "（没有写入文件）。{how}",
    "gate_proof_many": "retaincheck：去掉这 {n} 处 retain_graph=True 后重新运行做了核对"
    "（没有写入文件）。"
    "{how}",
    "gate_skipped": "retaincheck：用了 --skip-proof，没有去掉这个参数重新运行，结论未经验证",
    "why_untaken": "。本次运行中，之后没有 backward() 或 grad() 遍历这张计算图，但 {calls} "
    "处的 backward()/grad() 调用在这个调用位置首次执行之后一次也没有执行；"
    "换一条这次没走的路径，它就可能遍历这张图",
    "k_untaken": "不改：无法判断（这个调用位置首次执行之后，{call} 处的调用一次也没有执行）",
    "s_untaken": "先留着这个参数；或者换一组参数运行程序，"
    "让这个调用位置首次执行之后还能执行到 {call}"
    "（附近一处在那之后没有执行的 backward() 或 grad()），再检查一次",
    "by_child": "fork 出来的子进程",
    "why_unproven": "。之后没有 backward() 或 grad() 遍历这张计算图，但无法证明可以去掉这个参数"
    "（{reason}）",
    "s_unproven": "先留着：上面的原因说明了去掉参数后的重新运行为什么证明不了什么",
    "k_unproven": "不改：无法判断（去掉参数后的重新运行不能作为验证）",
    "why_child": "。本进程中，之后没有 backward() 或 grad() 遍历这张计算图，但运行期间 fork "
    "出来的子进程（pid {pids}）在运行结束时仍未退出，它可能遍历这张图",
    "s_child": "先留着这个参数；或者在运行结束前等 fork 出来的子进程全部退出（join），再检查一次",
    "k_child": "不改：无法判断（fork 出来的子进程 pid {pids} 仍在运行）",
    "why_part": "。之后没有 backward() 或 grad() 遍历这次调用执行过的部分，但之后的反向传播"
    "遍历了这张图里被这次调用的 inputs 排除在外的部分；换一组 inputs，这次调用就会执行并释放"
    "那部分，之后的反向传播随即报错",
    "s_part": "先留着；除非这次调用每次传入的 inputs 都把之后那次反向传播要走的部分排除在外"
    "（这一点只有你能确认）",
    "k_part": "不改：无法判断（之后的反向传播遍历了这次调用的 inputs 排除在外的那部分图）",
    "why_compiled": "。之后没有 backward() 或 grad() 遍历这张计算图，但它经过的反向传播由 "
    "torch.compile 在第一次运行时编译，编译方式取决于那次运行的 retain_graph；去掉参数后，"
    "它可能按捐赠缓冲区（donated buffers）的方式编译，之后经过同一段编译代码的 "
    "retain_graph=True 就会报错",
    "s_compiled": "先留着；除非经过这个编译模型的 backward() 都不用 retain_graph=True"
    "（这一点只有你能确认）",
    "k_compiled": "不改：无法判断（torch.compile 编译的反向传播会读取这个参数）",
    "why_passed": "。之后没有 backward() 或 grad() 遍历这张计算图，但这里的参数不是字面量 "
    "True（是名字、表达式、按位置传入的值、*args 或 **kwargs）：写它的是别处的代码，"
    "程序也可能会查看它的值",
    "s_passed": "先留着：它的值来自别处（参数、配置、调用方或包装函数），换一次运行就可能是 True；"
    "要检查这次调用，就在调用里直接写 retain_graph=True，再运行一次 retaincheck",
    "k_passed": "不改：无法判断（这里的参数不是字面量 True，它来自别的行）",
    "why_observed": "。之后没有 backward() 或 grad() 遍历这张计算图，但这次调用经过了 "
    "__torch_function__（张量子类的或 TorchFunctionMode 的），它能看到这个参数，也可能据此行事",
    "s_observed": "先留着；除非那个 __torch_function__ 从不查看 retain_graph（这一点只有你能确认）",
    "k_observed": "不改：无法判断（途经的 __torch_function__ 能看到这个参数）",
    "why_watched": "。之后没有 backward() 或 grad() 遍历这张计算图，但程序自己的性能分析或跟踪函数"
    "（sys.setprofile、sys.settrace、sys.monitoring）看到了这次调用，包括这个参数，也可能据此行事",
    "s_watched": "先留着；除非那个性能分析或跟踪函数从不查看 retain_graph（这一点只有你能确认）；"
    "去掉它再运行 retaincheck，就能检查这个参数",
    "k_watched": "不改：无法判断（程序自己的性能分析或跟踪函数能看到这个参数）",
    "why_unread": "。之后没有 backward() 或 grad() 遍历这张计算图，但读不到这一行的代码（它由字符串"
    "编译而来；或者运行之后文件改了、不在了；或者按它的相对文件名找不到编译结果相符的文件，或者找到了两个），"
    "看不出这里的参数是不是字面量 True",
    "s_unread": "先留着；要检查它，请把代码存进文件，再用 retaincheck 运行",
    "k_unread": "不改：无法判断（读不到这一行的代码）",
    "why_once": "。之后没有 backward() 或 grad() 遍历这张计算图，"
    "但没有看到它所在的循环在同一轮执行的两次迭代里都执行这一行：多迭代几次，它就可能再次遍历留下的某张图",
    "s_once": "先留着；或者让循环至少执行两次，再检查一次",
    "k_once": "不改：无法判断（没有看到它所在的循环把它执行两次）",
    "why_held": "。之后没有 backward() 或 grad() 遍历这张计算图，"
    "也看到了它所在的循环在两次迭代里都执行这一行，"
    "但程序持有某次迭代之前的图（循环之前建好的，或者从更早的迭代留下的，放在名字、属性、缓存或迭代器里）："
    "之后的某次迭代可能遍历它",
    "s_held": "先留着；或者把这张图放到循环里面构建（或者先 detach），再检查一次",
    "k_held": "不改：无法判断（持有更早迭代的图）",
    "why_generated": "。之后没有 backward() 或 grad() 遍历这张计算图，"
    "但这一行所在的文件是程序运行时写出来的（生成的代码），"
    "换一次运行，这里的字面量 True 可能写成别的值",
    "s_generated": "先留着；要检查它，请看写出这个文件的代码和它的选项",
    "k_generated": "不改：无法判断（这一行所在的文件是程序运行时写出来的）",
    "proof_tracer": "程序设置了自己的跟踪函数，重新运行时无法监视被程序捕获的计算图已释放错误",
    "proof_interrupted": "重新运行被中断了（Ctrl-C）",
    "proof_stopped": "受检查的那次运行收到了 {signal}，所以没有重新运行",
})

CATALOGS = {"en": EN, "zh": ZH}


def zh_tag(verdict: str) -> str:
    """The tag a Chinese verdict carries: ``"not needed"`` -> ``"NOT_NEEDED"``."""
    return re.sub(r"[^A-Z]+", "_", verdict.upper()).strip("_")


def message(key: str, lang: str = "en", **values) -> str:
    """The template ``key`` in ``lang``, filled with ``values``."""
    return CATALOGS[lang][key].format(**values)


def _pattern(key: str) -> re.Pattern:
    parts = re.split(r"\{\w+\}", EN[key])
    return re.compile(r"(\d+)".join(map(re.escape, parts)))


def reused_by(entries: list[str], lang: str = "en") -> str:
    """``CallRecord.reused_by`` as the report shows it: ``file:line`` entries as they are, the
    English note a refuted ``--fix`` proof leaves (``by_rerun_*``, kept in English for the
    JSON) in ``lang``."""
    shown = []
    for entry in entries:
        many = _pattern("by_rerun_many").fullmatch(entry)
        if entry == EN["by_rerun_one"]:
            entry = message("by_rerun_one", lang)
        elif entry == EN["by_child"]:
            entry = message("by_child", lang)
        elif many:
            entry = message("by_rerun_many", lang, n=many.group(1))
        shown.append(entry)
    text = ", ".join(shown)
    if lang == "zh" and text[:1].isascii():
        text = " " + text  # a space between hanzi and Latin text (file:line), none before hanzi
    return text
