# Sourced by run_megatron.sh: the pretrain_gpt.py arguments for the tiny GPT run.
# Megatron-LM core_r0.19.0 @ f8837c04 scripts + megatron-core 0.19.2 wheel; no TE, no apex, no data files.
MEGATRON_ARGS=(
    # model: tiny GPT, 4 layers x 512 hidden x 8 heads, learned absolute positions, LayerNorm
    --num-layers 4
    --hidden-size 512
    --ffn-hidden-size 2048
    --num-attention-heads 8
    --seq-length 1024
    --max-position-embeddings 1024
    --position-embedding-type learned_absolute
    --normalization LayerNorm
    --attention-dropout 0.0
    --hidden-dropout 0.0
    # parallel layout: 1 GPU, TP=1 PP=1 -> DP=1; global 32 / micro 4 = 8 micro-batches (grad accumulation)
    --tensor-model-parallel-size 1
    --pipeline-model-parallel-size 1
    --micro-batch-size 4
    --global-batch-size 32
    # no Transformer Engine, no apex: local (pure torch) transformer, no apex/CUDA-extension fusions
    --transformer-impl local
    --no-gradient-accumulation-fusion
    --no-masked-softmax-fusion
    --no-persist-layer-norm
    # precision / optimizer
    --bf16
    --optimizer adam
    --lr 6.0e-4
    --min-lr 6.0e-5
    --lr-decay-style cosine
    --lr-warmup-iters 10
    --weight-decay 0.1
    --adam-beta1 0.9
    --adam-beta2 0.95
    --clip-grad 1.0
    --init-method-std 0.02
    --seed 1234
    # schedule: 100 iterations, eval every 50 with 5 eval iters
    --train-iters 100
    --eval-interval 50
    --eval-iters 5
    # data: synthetic tokens, no tokenizer files
    --mock-data
    --tokenizer-type NullTokenizer
    --vocab-size 32000
    --num-workers 1
    # logging
    --log-interval 5
    --log-throughput
    --log-energy
    --log-params-norm
    --log-num-zeros-in-grad
    --timing-log-level 1
    --timing-log-option minmax
    --log-memory-interval 50
)
