"""What readers type into the site's search, and the sections that answer it.

Each entry: the root it is typed on ("en": /, "zh": /zh/), the query, and the sections that
answer it (page URL relative to the language root, then the anchor). The section that answers
must be the first result (the one Enter opens) for at least 90 % of the queries and among the
first three for every one (the search tests of tests/test_browser.py).

The set was written before the search was tuned, and covers several phrasings per answer:
PyTorch's messages pasted whole and in part, in their current and older wordings, and plain
questions. The older wordings were read in PyTorch's source history:

- "... a second time, but the buffers have already been freed ... retain_variables=True ..."
  (0.1-0.2, torch/csrc/autograd/python_function.cpp, THPFunction_saved_tensors); "... but the
  buffers have already been freed. Specify retain_graph=True when calling backward the first
  time." (0.2-0.4); "... but the saved intermediate results have already been freed. Specify
  retain_graph=True when calling .backward() or autograd.grad() the first time." (1.x, before
  the "(or directly access saved tensors ...)" wording of torch/csrc/autograd/saved_variable.cpp,
  SavedVariable::unpack).
- "... has been modified by an inplace operation" with no detail (0.3-0.4), then with
  "Hint: the backtrace further above shows the operation that failed to compute its gradient.
  The variable in question was changed in there or anywhere later. Good luck!" (anomaly mode on;
  saved_variable.cpp, SavedVariable::unpack).
- "element 0 of variables does not require grad ..." (0.3, before Variable and Tensor merged);
  "there are no graph nodes that require computing gradients" (0.1-0.3,
  torch/csrc/autograd/engine.cpp, Engine::execute).
- "Checkpointing is not compatible with .grad(), please use .backward() if possible" (1.0-1.8)
  and "... or when an `inputs` parameter is passed to .backward() ..." (1.9-2.0)
  (torch/utils/checkpoint.py, CheckpointFunction.backward).
"""

TS = "guide/troubleshooting/"
WYNI = "guide/when-you-need-it/"
ALT = "guide/alternatives/"
AG = "guide/autograd-graph/"
OTHER = "guide/with-other-features/"

SECOND_TIME = [TS + "#backward-second-time", "#the-error"]
INPLACE = [TS + "#inplace-modified", WYNI + "#gan-inplace-error"]
NO_GRAD_FN = [TS + "#no-grad-fn"]
SCALAR = [TS + "#scalar-outputs"]
REENTRANT = [TS + "#checkpoint-reentrant"]
MEMORY = [TS + "#memory-grows", "benchmarks/#forgotten-retain"]
SLOWER = [TS + "#slows-down", "benchmarks/#forgotten-retain"]
TWO_LOSSES = [ALT + "#sum-the-losses", ALT + "#backward-several-losses",
              "#you-usually-do-not-need-it"]
GAN = [WYNI + "#gan", WYNI + "#gan-done-right"]
PER_LOSS = [WYNI + "#per-loss-gradients"]
BPTT = [WYNI + "#truncated-bptt", TS + "#backward-second-time"]

FULL_SECOND_TIME = (
    "RuntimeError: Trying to backward through the graph a second time (or directly access saved "
    "tensors after they have already been freed). Saved intermediate values of the graph are "
    "freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you need "
    "to backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)
OLD_SECOND_TIME_1X = (
    "RuntimeError: Trying to backward through the graph a second time, but the saved "
    "intermediate results have already been freed. Specify retain_graph=True when calling "
    ".backward() or autograd.grad() the first time."
)
OLD_SECOND_TIME_04 = (
    "Trying to backward through the graph a second time, but the buffers have already been "
    "freed. Specify retain_graph=True when calling backward the first time."
)
FULL_INPLACE = (
    "RuntimeError: one of the variables needed for gradient computation has been modified by an "
    "inplace operation: [torch.FloatTensor [3, 1]], which is output 0 of TBackward0, is at "
    "version 2; expected version 1 instead. Hint: enable anomaly detection to find the "
    "operation that failed to compute its gradient, with torch.autograd.set_detect_anomaly(True)."
)
OLD_INPLACE = (
    "one of the variables needed for gradient computation has been modified by an inplace "
    "operation: [torch.cuda.FloatTensor [3200, 512]], which is output 0 of ReluBackward0, is at "
    "version 1; expected version 0 instead. Hint: the backtrace further above shows the "
    "operation that failed to compute its gradient. The variable in question was changed in "
    "there or anywhere later. Good luck!"
)
FULL_REENTRANT = (
    "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() or passing an "
    "`inputs` parameter to .backward(). To resolve this error, you can either set "
    "use_reentrant=False, or call .backward() without passing the `inputs` argument."
)
CREATE_GRAPH_WARNING = (
    "UserWarning: Using backward() with create_graph=True will create a reference cycle between "
    "the parameter and its gradient which can cause a memory leak. We recommend using "
    "autograd.grad when creating the graph to avoid this."
)

QUERIES: list[tuple[str, str, list[str]]] = [
    # --- English root: PyTorch's messages -------------------------------------------------
    ("en", FULL_SECOND_TIME, SECOND_TIME),
    ("en", "Trying to backward through the graph a second time", SECOND_TIME),
    ("en", OLD_SECOND_TIME_1X, SECOND_TIME),
    ("en", OLD_SECOND_TIME_04, SECOND_TIME),
    ("en", "Trying to backward through the graph second time, but the buffers have already been "
           "freed. Please specify retain_variables=True when calling backward for the first time.",
     SECOND_TIME),
    ("en", "backward through the graph a second time", SECOND_TIME),
    ("en", "directly access saved tensors after they have already been freed",
     [WYNI + "#saved-tensors", *SECOND_TIME]),
    ("en", FULL_INPLACE, INPLACE),
    ("en", OLD_INPLACE, INPLACE),
    ("en", "modified by an inplace operation", INPLACE),
    ("en", "is at version 1; expected version 0 instead", INPLACE),
    ("en", "RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn",
     NO_GRAD_FN),
    ("en", "element 0 of variables does not require grad and does not have a grad_fn",
     NO_GRAD_FN),
    ("en", "there are no graph nodes that require computing gradients", NO_GRAD_FN),
    ("en", "does not have a grad_fn", NO_GRAD_FN),
    ("en", "RuntimeError: grad can be implicitly created only for scalar outputs", SCALAR),
    ("en", FULL_REENTRANT, REENTRANT),
    ("en", "Checkpointing is not compatible with .grad() or when an `inputs` parameter is passed "
           "to .backward(). Please use .backward() and do not pass its `inputs` argument.",
     REENTRANT),
    ("en", "Checkpointing is not compatible with .grad(), please use .backward() if possible",
     REENTRANT),
    ("en", CREATE_GRAPH_WARNING, [WYNI + "#create-graph-reference-cycle"]),
    # --- English root: questions ------------------------------------------------------------
    ("en", "do I need retain_graph with two optimizers", [*GAN, *PER_LOSS]),
    ("en", "retain_graph slows my loop", SLOWER),
    ("en", "memory keeps growing every iteration", MEMORY),
    ("en", "two losses one backward", TWO_LOSSES),
    ("en", "add the losses instead of retain_graph", TWO_LOSSES),
    ("en", "RNN hidden state detach", BPTT),
    ("en", "what does retain_graph=True do", ["#what-it-does"]),
    ("en", "gradient penalty WGAN-GP", [WYNI + "#gradient-penalty"]),
    ("en", "hessian vector product", [WYNI + "#hessian-vector-product"]),
    ("en", "activation checkpointing to save memory", [ALT + "#checkpoint"]),
    ("en", "difference between retain_graph and detach", [ALT + "#detach"]),
    ("en", "is my retain_graph=True needed", ["retaincheck/"]),
    ("en", "retain_graph with DDP two losses", ["guide/distributed/#two-losses"]),
    ("en", "torch.compile retain_graph", [OTHER + "#torch-compile"]),
    ("en", "GradScaler with two losses", [OTHER + "#amp-several-losses"]),
    ("en", "gradients doubled after calling backward twice",
     [AG + "#gradients-accumulate", "article-corrected/#gradients-add-up"]),
    ("en", "multi-task learning separate gradient for each loss", PER_LOSS),
    ("en", "when do I really need retain_graph", [WYNI, WYNI + "#summary"]),
    ("en", "gradients wrong after optimizer.step between two backward",
     [TS + "#wrong-gradients-no-error", "article-corrected/#parameters-changed"]),
    # --- Chinese root: messages pasted as PyTorch prints them (in English) ------------------
    ("zh", FULL_SECOND_TIME, SECOND_TIME),
    ("zh", OLD_SECOND_TIME_04, SECOND_TIME),
    ("zh", "modified by an inplace operation", INPLACE),
    ("zh", OLD_INPLACE, INPLACE),
    ("zh", "element 0 of tensors does not require grad", NO_GRAD_FN),
    ("zh", "grad can be implicitly created only for scalar outputs", SCALAR),
    ("zh", FULL_REENTRANT, REENTRANT),
    # --- Chinese root: questions in Chinese ------------------------------------------------
    ("zh", "为什么第二次 backward 报错", SECOND_TIME),
    ("zh", "第二次反向传播", SECOND_TIME),
    ("zh", "第二次调用 backward 报错 计算图已经被释放", SECOND_TIME),
    ("zh", "retain_graph 和 detach 有什么区别", [ALT + "#detach"]),
    ("zh", "多任务学习 梯度 分开算", PER_LOSS),
    ("zh", "两个优化器 需要 retain_graph 吗", [*GAN, *PER_LOSS]),
    ("zh", "retain_graph 让训练变慢", SLOWER),
    ("zh", "显存一直增长", MEMORY),
    ("zh", "每次迭代 内存 越来越大", MEMORY),
    ("zh", "多个损失相加 只调用一次 backward", TWO_LOSSES),
    ("zh", "原地操作 报错", INPLACE),
    ("zh", "inplace 修改了反向传播需要的张量", INPLACE),
    ("zh", "损失没有 grad_fn", NO_GRAD_FN),
    ("zh", "loss 不是标量", SCALAR),
    ("zh", "梯度检查点 use_reentrant 报错", REENTRANT),
    ("zh", "用梯度检查点节省显存", [ALT + "#checkpoint"]),
    ("zh", "GAN 训练 retain_graph", GAN),
    ("zh", "判别器 生成器 更新顺序", GAN),
    ("zh", "梯度惩罚", [WYNI + "#gradient-penalty"]),
    ("zh", "二阶导数", [WYNI + "#higher-order", WYNI + "#create-graph-retains"]),
    ("zh", "海森向量积", [WYNI + "#hessian-vector-product"]),
    ("zh", "RNN 隐藏状态 detach", BPTT),
    ("zh", "截断 BPTT", [WYNI + "#truncated-bptt"]),
    ("zh", "retain_graph=True 到底做了什么", ["#what-it-does"]),
    ("zh", "什么时候真的需要 retain_graph", [WYNI, WYNI + "#summary"]),
    ("zh", "两次 backward 梯度翻倍", [AG + "#gradients-accumulate",
                                     "article-corrected/#gradients-add-up"]),
    ("zh", "我的 retain_graph 有必要吗", ["retaincheck/"]),
    ("zh", "DDP 一次前向 两个损失", ["guide/distributed/#two-losses"]),
    ("zh", "混合精度 多个损失", [OTHER + "#amp-several-losses"]),
    ("zh", "梯度错了却不报错", [TS + "#wrong-gradients-no-error",
                               "article-corrected/#parameters-changed"]),
    ("zh", "反向传播之后读取保存的张量", [WYNI + "#saved-tensors"]),
    ("zh", "torch.compile 和 retain_graph", [OTHER + "#torch-compile"]),
    ("zh", "create_graph=True 内存泄漏 警告", [WYNI + "#create-graph-reference-cycle"]),
]

# Held out: 30 queries written by a reviewer (issue 31's review) before reading this file or
# hooks/search_keywords.yml, with the sections that answer them. The search was retuned after
# they were added, but hooks/search_keywords.yml must not restate them: their figures are
# printed apart from the set above.
HELD_OUT: list[tuple[str, str, list[str]]] = [
    ("en", "Trying to backward through the graph a second time",
     [*SECOND_TIME, AG + "#the-error"]),
    ("en", "Trying to backward through the graph a second time (or directly access saved tensors "
           "after they have already been freed)", [*SECOND_TIME, AG + "#the-error"]),
    ("en", "Saved intermediate values of the graph are freed when you call .backward() or "
           "autograd.grad(). Specify retain_graph=True if you need to backward through the graph "
           "a second time or if you need to access saved tensors after calling backward.",
     [*SECOND_TIME, AG + "#the-error"]),
    ("en", "one of the variables needed for gradient computation has been modified by an inplace "
           "operation", INPLACE),
    ("en", "element 0 of tensors does not require grad and does not have a grad_fn", NO_GRAD_FN),
    ("en", "retain_graph memory leak",
     [TS + "#memory-grows", AG + "#retained-graph-lifetime", "benchmarks/#forgotten-retain"]),
    ("en", "GAN discriminator generator backward twice", GAN),
    ("en", "does retain_graph=True make it faster",
     ["#what-it-does", "article-corrected/#section-1-reuse", "benchmarks/#time"]),
    ("en", "multiple losses backward", [*TWO_LOSSES[:2], PER_LOSS[0]]),
    ("en", "LSTM hidden state backward error", BPTT),
    ("en", "WGAN-GP gradient penalty",
     [WYNI + "#gradient-penalty", "guide/distributed/#gradient-penalty"]),
    ("en", "compiled with non-empty donated buffers which requires create_graph=False and "
           "retain_graph=False",
     [OTHER + "#torch-compile", OTHER + "#donated-buffers", OTHER + "#workaround"]),
    ("en", "Expected to mark a variable ready only once",
     ["guide/distributed/#static-graph-and-find-unused-parameters",
      "guide/distributed/#checkpointing"]),
    ("en", "training gets slower every iteration", [TS + "#slows-down"]),
    ("en", "GradScaler two losses retain_graph", [OTHER + "#amp-several-losses"]),
    ("zh", "Trying to backward through the graph a second time",
     [*SECOND_TIME, AG + "#the-error"]),
    ("zh", "one of the variables needed for gradient computation has been modified by an inplace "
           "operation", INPLACE),
    ("zh", "多个 loss 怎么反向传播", [*TWO_LOSSES[:2], PER_LOSS[0]]),
    ("zh", "retain_graph=True 会不会变快",
     ["#what-it-does", "article-corrected/#section-1-reuse", "benchmarks/#time"]),
    ("zh", "显存泄漏 retain_graph",
     [TS + "#memory-grows", AG + "#retained-graph-lifetime", "benchmarks/#forgotten-retain"]),
    ("zh", "GAN 判别器 生成器 backward 两次", GAN),
    ("zh", "RNN 隐藏状态 报错", BPTT),
    ("zh", "梯度惩罚", [WYNI + "#gradient-penalty", "guide/distributed/#gradient-penalty"]),
    ("zh", "训练越来越慢", [TS + "#slows-down"]),
    ("zh", "retain_graph 和 create_graph 的区别",
     [AG + "#create-graph", WYNI + "#create-graph-retains"]),
    ("zh", "混合精度 多个损失", [OTHER + "#amp-several-losses"]),
    ("zh", "DDP 梯度不对", ["guide/distributed/#two-losses", "guide/distributed/#at-a-glance",
                          "guide/distributed/#buckets"]),
    ("zh", "梯度检查点 节省显存", [ALT + "#checkpoint"]),
    ("zh", "第二次反向传播报错", [*SECOND_TIME, AG + "#the-error"]),
    ("zh", "element 0 of tensors does not require grad", NO_GRAD_FN),
]
