package keys

import "github.com/redis/go-redis/v9"

func setRedis(opts *Options, r any) {
	if c, ok := r.(*redis.Client); ok && c != nil {
		opts.Redis = c
	}
}
