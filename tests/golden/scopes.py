from tunedsl import autotune as tune, cdiv


class Ops:
    def run(self, x, n):
        return tune(space=dict(B=[16, 32]), blocks=cdiv(n, $B), self.kernel(x, n, B=$B))

    @staticmethod
    def many(xs, n):
        return [tune(space=dict(B=[16]), blocks=cdiv(n, $B), k(x, B=$B)) for x in xs]


def outer(x, n):
    def inner(m):
        return tune(space=dict(B=[8, 16]), blocks=lambda_blocks(m, $B), k(x, m, B=$B))

    f = lambda y: tune(space=dict(B=[4]), blocks=1, k(y, B=$B))
    return inner(n), f(x)
